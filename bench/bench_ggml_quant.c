/*
 * bench_ggml_quant.c - tensorbox's ggml block kernels (src/quant/ggml*.c) beside ggml's own,
 * loaded at run time from llama.cpp's libggml-base.so (as llama-cpp-python ships it).
 *
 *   bench_ggml_quant [--ggml-lib PATH] [--mb N] [--qmb N] [--imb N] [--reps R] [--threads T]
 *                    [--only TYPE[,TYPE...]] [--no-dequant] [--no-quant] [--no-imatrix]
 *                    [--random] [--wall] [--best]
 *
 * The peer is ggml itself, never a port of it: libggml-base.so is opened with dlopen (path from
 * --ggml-lib, else the environment variable TBX_GGML_LIB; bench/run_all.sh finds it in .venv).
 * Without it the program says so and exits with status 2: it never skips the peer.
 *
 * Dequantization, for every ggml block type tensorbox decodes: tensorbox's dispatched kernel
 * beside ggml's type_traits.to_float, one thread, N MiB of f32 written (default 64). The blocks
 * are tensorbox's quantization of N(0,1) data where tensorbox quantizes the type, else ggml's
 * (ggml_quantize_chunk; uniform importance matrix for the types that need one), else random
 * bytes (--random: random bytes for every type). The two outputs must be bit-identical: any
 * difference is reported and makes the exit status 1.
 *
 * Quantization, for every ggml block type tensorbox encodes: tensorbox's dispatched quantizer
 * beside ggml_quantize_chunk (no importance matrix), the same N(0,1) rows of 4096 values
 * (default 16 MiB of f32), on one thread and on T threads (default: every online CPU), each
 * thread taking a contiguous range of rows (as llama-quantize splits work). tensorbox's
 * quantizer is the one conversions use by default (tbx_ggml_quant_default_for: ggml's
 * algorithm, its bytes); for the K types tensorbox's own search encoder (quant_method=search,
 * tbx_ggml_quant_search_for) is timed too on one thread, with its RMSE. Per type: whether
 * tensorbox's bytes equal ggml's (they should for every type), and the RMSE of each, relative
 * to the data's RMS.
 *
 * Quantization with an importance matrix (unless --no-imatrix): every type with a row
 * quantizer (tbx_ggml_quant_rows_for) beside ggml_quantize_chunk given the same random positive
 * matrix, N MiB of the same rows (--imb, default 4), one thread; whether the bytes are identical
 * (ggml's weighted algorithms are tensorbox's row quantizers' contract) and the RMSE of each.
 * The quantization section times the row quantizer for the types without a block quantizer
 * (iq4_nl, iq4_xs, nvfp4, q1_0, q2_0 and the codebook types iq2_xxs .. iq1_m).
 *
 * Every figure is the median of R runs (default 7; --best: the fastest). One-thread runs are
 * timed by the thread's CPU time (on a shared machine wall time also counts waiting for a CPU;
 * --wall: wall-clock time); the multi-threaded runs by wall-clock time. "%memcpy" is the kernel's
 * speed as a fraction of memcpy of the same number of f32 bytes (the output of a dequantizer,
 * the input of a quantizer), timed the same way.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "ggml.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL
#include <tensorbox/gguf.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the part of ggml's C ABI this program calls (ggml.h of llama.cpp, declared here so the
 * build does not need ggml's headers) ---------------------------------------------------------- */
typedef void (*g_to_float_fn)(const void *x, float *y, int64_t k);
typedef void (*g_from_float_fn)(const float *x, void *y, int64_t k);
struct g_type_traits { /* struct ggml_type_traits */
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    g_to_float_fn to_float;
    g_from_float_fn from_float_ref;
};
static const struct g_type_traits *(*g_get_type_traits)(int type);
static size_t (*g_quantize_chunk)(int type, const float *src, void *dst, int64_t start,
                                  int64_t nrows, int64_t n_per_row, const float *imatrix);
static bool (*g_quantize_requires_imatrix)(int type);
static int64_t (*g_blck_size)(int type);
static size_t (*g_type_size)(int type);

static void *load_sym(void *h, const char *lib, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "bench_ggml_quant: %s has no symbol %s\n", lib, name);
        exit(2);
    }
    return p;
}

/* ---- timing ------------------------------------------------------------------------------- */
static int use_wall;
static double clock_s(int wall) {
    struct timespec ts;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static int use_best;
/* The median (or with --best the smallest) of n times. */
static double summarize(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    if (use_best) return v[0];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- data --------------------------------------------------------------------------------- */
static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd64(void) {
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return rs * 0x2545F4914F6CDD1Dull;
}
static double rndu(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) {
    double u = rndu(), v = rndu();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench_ggml_quant: out of memory (%zu bytes)\n", n);
        exit(2);
    }
    memset(p, 0, n); /* page in before anything is timed */
    return p;
}

static int selected(const char *only, const char *name) {
    if (!only) return 1;
    const size_t n = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* ---- the kernels being timed, as one call shape ------------------------------------------- */
enum { K_TBX_DQ, K_GGML_DQ, K_TBX_Q, K_TBX_ROWS, K_GGML_Q, K_MEMCPY };
#define ROW 4096 /* values per row for the quantizers (a multiple of every block size) */
typedef struct job {
    int kind;
    int gtype;                /* ggml type id */
    tbx_dequant_fn tdq;
    tbx_quant_fn tq;
    tbx_quant_rows_fn trows;  /* K_TBX_ROWS: the row quantizer (ggml_quantize_chunk's contract) */
    const float *qw;          /* K_TBX_ROWS, K_GGML_Q: importance matrix of ROW columns, or NULL */
    g_to_float_fn gdq;
    const float *x;           /* f32 input (quantizers) */
    float *y;                 /* f32 output (dequantizers) */
    const void *qin;          /* blocks in (dequantizers) */
    void *qout;               /* blocks out (quantizers) */
    uint64_t row0, nrows;     /* quantizers: rows [row0, row0+nrows) of ROW values */
    uint64_t nvals;           /* dequantizers, memcpy: values */
    uint32_t bsize, bbytes;   /* block size and bytes */
} job;

static void run_job(const job *j) {
    switch (j->kind) {
    case K_TBX_DQ: j->tdq(j->qin, j->y, j->nvals / j->bsize); break;
    case K_GGML_DQ: j->gdq(j->qin, j->y, (int64_t)j->nvals); break;
    case K_MEMCPY: memcpy(j->y, j->x, j->nvals * 4); break;
    case K_TBX_Q: {
        const uint64_t bpr = ROW / j->bsize; /* blocks per row */
        j->tq(j->x + j->row0 * ROW, (uint8_t *)j->qout + j->row0 * bpr * j->bbytes,
              j->nrows * bpr);
        break;
    }
    case K_TBX_ROWS: {
        const uint64_t bpr = ROW / j->bsize;
        j->trows(j->x + j->row0 * ROW, (uint8_t *)j->qout + j->row0 * bpr * j->bbytes,
                 (int64_t)j->nrows, ROW, j->qw);
        break;
    }
    case K_GGML_Q:
        g_quantize_chunk(j->gtype, j->x, j->qout, (int64_t)(j->row0 * ROW), (int64_t)j->nrows,
                         ROW, j->qw);
        break;
    }
}
static void *thread_main(void *arg) {
    run_job(arg);
    return NULL;
}

/* Median seconds of `reps` runs of j: on one thread (nthreads <= 1, CPU time unless --wall), or
 * split into nthreads contiguous row ranges (quantizers only; wall time). */
static double time_job(const job *j, int reps, int nthreads) {
    double r[64];
    if (nthreads <= 1) {
        run_job(j); /* warm up (and ggml_quantize_init) */
        for (int i = 0; i < reps; i++) {
            const double t0 = clock_s(use_wall);
            run_job(j);
            r[i] = clock_s(use_wall) - t0;
        }
        return summarize(r, reps);
    }
    job parts[64];
    pthread_t th[64];
    for (int t = 0; t < nthreads; t++) {
        parts[t] = *j;
        parts[t].row0 = j->row0 + j->nrows * (uint64_t)t / (uint64_t)nthreads;
        parts[t].nrows = j->row0 + j->nrows * (uint64_t)(t + 1) / (uint64_t)nthreads - parts[t].row0;
    }
    for (int i = -1; i < reps; i++) { /* i = -1: warm up */
        const double t0 = clock_s(1);
        for (int t = 0; t < nthreads; t++)
            if (pthread_create(&th[t], NULL, thread_main, &parts[t]) != 0) {
                fprintf(stderr, "bench_ggml_quant: pthread_create failed\n");
                exit(2);
            }
        for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
        if (i >= 0) r[i] = clock_s(1) - t0;
    }
    return summarize(r, reps);
}

/* 1 when ggml_quantize_chunk of this libggml encodes `gtype` (with this importance matrix of
 * ROW weights, or none). It aborts on a type its switch lacks, so the question is asked in a
 * child process (quietly: no backtrace, output to /dev/null). */
static int ggml_can_quantize(int gtype, const float *x, void *buf, const float *imatrix) {
    if (!imatrix && g_quantize_requires_imatrix(gtype)) return 0;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        setenv("GGML_NO_BACKTRACE", "1", 1);
        const int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        const size_t n = g_quantize_chunk(gtype, x, buf, 0, 1, ROW, imatrix);
        _exit(n == (size_t)(ROW / g_blck_size(gtype)) * g_type_size(gtype) ? 0 : 1);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* RMSE of the decoded blocks relative to the RMS of x (decoded by tensorbox's scalar kernel,
 * which the dequantization section checks bit for bit against ggml's). */
static double rel_rmse(tbx_dtype dt, const float *x, const void *blk, float *y, uint64_t nvals) {
    const tbx_dtype_info *in = tbx_dtype_get(dt);
    tbx_ggml_dequant_scalar_for(dt)(blk, y, nvals / in->block_size);
    double e = 0, s = 0;
    for (uint64_t i = 0; i < nvals; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        s += (double)x[i] * x[i];
    }
    return sqrt(e / s);
}

static const char *fmt(char *buf, size_t n, const char *f, double v) {
    if (v > 0) snprintf(buf, n, f, v);
    else snprintf(buf, n, "-");
    return buf;
}

int main(int argc, char **argv) {
    double mb = 64, qmb = 16, imb = 4;
    int reps = 7, do_dq = 1, do_q = 1, do_imat = 1, random_blocks = 0, nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *only = NULL, *lib = getenv("TBX_GGML_LIB");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ggml-lib") && i + 1 < argc) lib = argv[++i];
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--qmb") && i + 1 < argc) qmb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--no-dequant")) do_dq = 0;
        else if (!strcmp(argv[i], "--no-quant")) do_q = 0;
        else if (!strcmp(argv[i], "--no-imatrix")) do_imat = 0;
        else if (!strcmp(argv[i], "--imb") && i + 1 < argc) imb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--wall")) use_wall = 1;
        else if (!strcmp(argv[i], "--best")) use_best = 1;
        else if (!strcmp(argv[i], "--random")) random_blocks = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--ggml-lib PATH] [--mb N] [--qmb N] [--imb N] [--reps R] "
                    "[--threads T] [--only t1,t2] [--no-dequant] [--no-quant] [--no-imatrix] "
                    "[--random] [--wall] [--best]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    if (!(mb > 0 && mb <= 4096) || !(qmb > 0 && qmb <= 4096) || !(imb > 0 && imb <= qmb)) {
        fprintf(stderr, "bench_ggml_quant: --mb and --qmb must be in (0, 4096], --imb in "
                        "(0, --qmb]\n");
        return 2;
    }

    if (!lib || !*lib) {
        fprintf(stderr, "bench_ggml_quant: no ggml library to compare with: give --ggml-lib PATH "
                        "or TBX_GGML_LIB=PATH (llama-cpp-python's llama_cpp/lib/libggml-base.so)\n");
        return 2;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench_ggml_quant: cannot load the ggml peer %s: %s\n", lib, dlerror());
        return 2;
    }
    g_get_type_traits = (const struct g_type_traits *(*)(int))load_sym(h, lib, "ggml_get_type_traits");
    g_quantize_chunk = (size_t(*)(int, const float *, void *, int64_t, int64_t, int64_t,
                                  const float *))load_sym(h, lib, "ggml_quantize_chunk");
    g_quantize_requires_imatrix = (bool (*)(int))load_sym(h, lib, "ggml_quantize_requires_imatrix");
    g_blck_size = (int64_t(*)(int))load_sym(h, lib, "ggml_blck_size");
    g_type_size = (size_t(*)(int))load_sym(h, lib, "ggml_type_size");

    const unsigned isa = tbx_ggml_cpu_isa();
    double load[3] = {0, 0, 0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(la);
    }
    printf("bench_ggml_quant: peer %s\n"
           "  %s of %d runs; 1 thread: %s time; %d threads: wall time; cpu:%s%s; %ld online "
           "CPUs, load average %.2f %.2f %.2f\n",
           lib, use_best ? "best" : "median", reps, use_wall ? "wall" : "cpu", nthreads,
           isa & TBX_GGML_ISA_AVX2 ? " avx2" : "", isa & TBX_GGML_ISA_AVX512 ? " avx512" : "",
           sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);

    /* the larger of the two sizes, in whole rows */
    const double big = mb > qmb ? mb : qmb;
    const uint64_t nvals_max = ((uint64_t)(big * 1048576.0 / 4) / ROW) * ROW;
    const uint64_t dq_vals = ((uint64_t)(mb * 1048576.0 / 4) / ROW) * ROW;
    const uint64_t q_vals = ((uint64_t)(qmb * 1048576.0 / 4) / ROW) * ROW;
    if (dq_vals == 0 || q_vals == 0) {
        fprintf(stderr, "bench_ggml_quant: --mb/--qmb below one row of %d values\n", ROW);
        return 2;
    }
    float *x = xmalloc(nvals_max * 4), *y = xmalloc(nvals_max * 4), *y2 = xmalloc(nvals_max * 4);
    /* blocks: at most 2 bytes per value for every ggml block type (q8_1: 36 bytes / 32) */
    uint8_t *blk = xmalloc(nvals_max * 2), *blk2 = xmalloc(nvals_max * 2);
    for (uint64_t i = 0; i < nvals_max; i++) x[i] = (float)gauss();
    float imat[ROW];
    for (int i = 0; i < ROW; i++) imat[i] = 1.0f;

    /* every ggml block type tensorbox knows, by ggml type id */
    int gids[128];
    tbx_dtype dts[128];
    int ntypes = 0;
    for (uint32_t id = 0; id < 128; id++) {
        const tbx_dtype dt = tbx_gguf_type_dtype(id);
        const tbx_dtype_info *in = tbx_dtype_get(dt);
        if (!in || !(in->flags & TBX_DTF_BLOCK) || !selected(only, in->name)) continue;
        gids[ntypes] = (int)id;
        dts[ntypes++] = dt;
    }
    int failed = 0;

    if (do_dq) {
        job mc = {.kind = K_MEMCPY, .x = x, .y = y, .nvals = dq_vals};
        const double tmc = time_job(&mc, reps, 1);
        printf("\ndequantize, 1 thread: GB/s of f32 written (%.0f MiB); memcpy %.2f GB/s\n"
               "%-8s %9s %9s %9s %8s %8s  %s\n",
               (double)dq_vals * 4 / 1048576.0, (double)dq_vals * 4 / tmc / 1e9, "type",
               "tensorbox", "ggml", "tbx/ggml", "tbx%mc", "ggml%mc", "bits");
        for (int t = 0; t < ntypes; t++) {
            const tbx_dtype dt = dts[t];
            const tbx_dtype_info *in = tbx_dtype_get(dt);
            const tbx_dequant_fn tdq = tbx_ggml_dequant_for(dt);
            if (!tdq) continue;
            const struct g_type_traits *tr = g_get_type_traits(gids[t]);
            const uint64_t nb = dq_vals / in->block_size;
            if (!tr || tr->blck_size != in->block_size || tr->type_size != in->block_bytes) {
                printf("%-8s ggml's type %d has another block layout (%lld values in %zu bytes)\n",
                       in->name, gids[t], tr ? (long long)tr->blck_size : 0LL,
                       tr ? tr->type_size : (size_t)0);
                failed = 1;
                continue;
            }
            /* the blocks: tensorbox's quantization, else ggml's, else random bytes */
            const char *src = "tbx-quantized";
            tbx_quant_fn q = tbx_ggml_quant_for(dt);
            if (random_blocks) goto random;
            if (q) q(x, blk, nb);
            else if (ggml_can_quantize(gids[t], x, blk, imat)) {
                /* ggml's i-quant encoders are slow: encode up to 256 rows and repeat them (the
                 * types that need an importance matrix get uniform weights) */
                const uint64_t rows = dq_vals / ROW, qr = rows < 256 ? rows : 256;
                const size_t rowb = (size_t)(ROW / in->block_size) * in->block_bytes;
                g_quantize_chunk(gids[t], x, blk, 0, (int64_t)qr, ROW, imat);
                for (uint64_t r = qr; r < rows; r++) memcpy(blk + r * rowb, blk + (r % qr) * rowb, rowb);
                src = "ggml-quantized";
            } else {
            random:
                for (uint64_t i = 0; i < nb * in->block_bytes; i++) blk[i] = (uint8_t)rnd64();
                src = "random bytes";
            }
            job jt = {.kind = K_TBX_DQ, .tdq = tdq, .qin = blk, .y = y, .nvals = dq_vals,
                      .bsize = in->block_size, .bbytes = in->block_bytes};
            const double tt = time_job(&jt, reps, 1);
            double tg = 0;
            const char *bits;
            if (tr->to_float) {
                job jg = jt;
                jg.kind = K_GGML_DQ;
                jg.gdq = tr->to_float;
                jg.y = y2;
                tg = time_job(&jg, reps, 1);
                if (memcmp(y, y2, dq_vals * 4) == 0) bits = "identical";
                else {
                    uint64_t nd = 0, nnan = 0;
                    for (uint64_t i = 0; i < dq_vals; i++)
                        if (memcmp(&y[i], &y2[i], 4) != 0) {
                            nd++;
                            nnan += isnan(y[i]) && isnan(y2[i]);
                        }
                    static char diff[96];
                    snprintf(diff, sizeof diff, "DIFFER (%llu values, %llu of them NaN on both sides)",
                             (unsigned long long)nd, (unsigned long long)nnan);
                    bits = diff;
                    failed = 1;
                }
            } else {
                bits = "ggml has no to_float";
            }
            char b1[32], b2[32], b3[32], b4[32], b5[32];
            printf("%-8s %9s %9s %9s %8s %8s  %s, %s\n", in->name,
                   fmt(b1, 32, "%.2f", (double)dq_vals * 4 / tt / 1e9),
                   fmt(b2, 32, "%.2f", tg > 0 ? (double)dq_vals * 4 / tg / 1e9 : 0),
                   fmt(b3, 32, "%.2fx", tg > 0 ? tg / tt : 0), fmt(b4, 32, "%.0f%%", 100 * tmc / tt),
                   fmt(b5, 32, "%.0f%%", tg > 0 ? 100 * tmc / tg : 0), bits, src);
        }
    }

    if (do_q) {
        const uint64_t nrows = q_vals / ROW;
        job mc = {.kind = K_MEMCPY, .x = x, .y = y, .nvals = q_vals};
        const double tmc = time_job(&mc, reps, 1);
        const double gb = (double)q_vals * 4 / 1e9;
        printf("\nquantize: GB/s of f32 read (%.0f MiB, rows of %d, N(0,1) data); memcpy %.2f GB/s\n"
               "  tbx = tensorbox's default quantizer (ggml's algorithm); ggml = ggml_quantize_chunk "
               "(no imatrix); search = tensorbox's K-quant search (quant_method=search); rmse "
               "relative to rms\n"
               "%-6s %9s %8s %8s %7s %7s | %8s %8s %8s | %-10s %8s %8s | %8s %8s\n",
               (double)q_vals * 4 / 1048576.0, ROW, gb / tmc, "type", "tbx 1T", "ggml 1T",
               "tbx/ggml", "tbx%mc", "ggml%mc", "tbx", "ggml", "tbx/ggml", "bytes", "rmse-tbx",
               "rmse-ggml", "search1T", "rmse-srch");
        char nt[16];
        snprintf(nt, sizeof nt, "%dT", nthreads);
        printf("%-6s %9s %8s %8s %7s %7s | %8s %8s %8s | %-10s %8s %8s | %8s %8s\n", "", "", "",
               "", "", "", nt, nt, nt, "", "", "", "", "");
        for (int t = 0; t < ntypes; t++) {
            const tbx_dtype dt = dts[t];
            const tbx_dtype_info *in = tbx_dtype_get(dt);
            /* the default block quantizer of a conversion, else the row quantizer (types
             * without one) */
            const tbx_quant_fn tq = tbx_ggml_quant_default_for(dt);
            const tbx_quant_rows_fn trows = tbx_ggml_quant_rows_for(dt);
            if (!tq && !trows) continue;
            job jt = {.kind = tq ? K_TBX_Q : K_TBX_ROWS, .tq = tq, .trows = trows, .x = x,
                      .qout = blk, .row0 = 0, .nrows = nrows, .bsize = in->block_size,
                      .bbytes = in->block_bytes, .gtype = gids[t]};
            const double tt1 = time_job(&jt, reps, 1);
            const double ttn = nthreads > 1 ? time_job(&jt, reps, nthreads) : tt1;
            const uint64_t qbytes = q_vals / in->block_size * in->block_bytes;
            const double et = rel_rmse(dt, x, blk, y, q_vals);
            char b[12][32];
            if (!ggml_can_quantize(gids[t], x, blk2, NULL)) {
                printf("%-6s %9.3f %8s %8s %7s %7s | %8.3f %8s %8s | %-10s %8.5f %8s |  ggml_quantize_chunk cannot encode it\n",
                       in->name, gb / tt1, "-", "-", fmt(b[0], 32, "%.0f%%", 100 * tmc / tt1), "-",
                       gb / ttn, "-", "-", "-", et, "-");
                continue;
            }
            job jg = jt;
            jg.kind = K_GGML_Q;
            jg.qout = blk2;
            const double tg1 = time_job(&jg, reps, 1);
            const double tgn = nthreads > 1 ? time_job(&jg, reps, nthreads) : tg1;
            char same[32];
            if (memcmp(blk, blk2, qbytes) == 0) snprintf(same, sizeof same, "identical");
            else {
                uint64_t nd = 0;
                for (uint64_t i = 0; i < q_vals / in->block_size; i++)
                    nd += memcmp(blk + i * in->block_bytes, blk2 + i * in->block_bytes,
                                 in->block_bytes) != 0;
                snprintf(same, sizeof same, "%.1f%% diff",
                         100.0 * (double)nd / (double)(q_vals / in->block_size));
            }
            const double eg = rel_rmse(dt, x, blk2, y, q_vals);
            /* tensorbox's own K-quant search, asked for with quant_method=search */
            const tbx_quant_fn tr = tbx_ggml_quant_search_for(dt);
            double tp = 0, ep = 0;
            if (tr) {
                job jp = jt;
                jp.tq = tr;
                tp = time_job(&jp, reps, 1);
                ep = rel_rmse(dt, x, blk, y, q_vals);
            }
            printf("%-6s %9.3f %8.3f %8s %7s %7s | %8.3f %8.3f %8s | %-10s %8.5f %8.5f | %8s %8s\n",
                   in->name, gb / tt1, gb / tg1, fmt(b[0], 32, "%.2fx", tg1 / tt1),
                   fmt(b[1], 32, "%.0f%%", 100 * tmc / tt1), fmt(b[2], 32, "%.0f%%", 100 * tmc / tg1),
                   gb / ttn, gb / tgn, fmt(b[3], 32, "%.2fx", tgn / ttn), same, et, eg,
                   fmt(b[4], 32, "%.3f", tp > 0 ? gb / tp : 0), fmt(b[5], 32, "%.5f", ep));
        }
    }
    if (do_q && do_imat) {
        /* rows with a random positive importance matrix (as llama-imatrix's mean squared
         * activations): the row quantizer beside ggml_quantize_chunk given the same matrix */
        const uint64_t ivals = ((uint64_t)(imb * 1048576.0 / 4) / ROW) * ROW;
        const uint64_t nrows = ivals / ROW ? ivals / ROW : 1;
        const double gb = (double)(nrows * ROW) * 4 / 1e9;
        float qw[ROW];
        for (int i = 0; i < ROW; i++) qw[i] = (float)(0.05 + rndu() * rndu() * 4.0);
        printf("\nquantize with an importance matrix (random positive, %d columns): GB/s of f32 "
               "read (%.0f MiB, rows of %d, N(0,1) data), 1 thread\n"
               "  tbx = tbx_ggml_quant_rows_for(type)(..., qw), ggml = ggml_quantize_chunk(..., "
               "qw)\n%-6s %9s %8s %8s | %-10s %8s %8s\n",
               ROW, (double)(nrows * ROW) * 4 / 1048576.0, ROW, "type", "tbx 1T", "ggml 1T",
               "tbx/ggml", "bytes", "rmse-tbx", "rmse-ggml");
        for (int t = 0; t < ntypes; t++) {
            const tbx_dtype dt = dts[t];
            const tbx_dtype_info *in = tbx_dtype_get(dt);
            const tbx_quant_rows_fn trows = tbx_ggml_quant_rows_for(dt);
            if (!trows || !ggml_can_quantize(gids[t], x, blk2, qw)) continue;
            job jt = {.kind = K_TBX_ROWS, .trows = trows, .qw = qw, .x = x, .qout = blk,
                      .row0 = 0, .nrows = nrows, .bsize = in->block_size,
                      .bbytes = in->block_bytes, .gtype = gids[t]};
            job jg = jt;
            jg.kind = K_GGML_Q;
            jg.qout = blk2;
            const double tt = time_job(&jt, reps, 1), tg = time_job(&jg, reps, 1);
            const uint64_t nb = nrows * ROW / in->block_size;
            uint64_t nd = 0;
            for (uint64_t i = 0; i < nb; i++)
                nd += memcmp(blk + i * in->block_bytes, blk2 + i * in->block_bytes,
                             in->block_bytes) != 0;
            char same[32], b0[32];
            if (nd == 0) snprintf(same, sizeof same, "identical");
            else snprintf(same, sizeof same, "%.1f%% diff", 100.0 * (double)nd / (double)nb);
            printf("%-6s %9.3f %8.3f %8s | %-10s %8.5f %8.5f\n", in->name, gb / tt, gb / tg,
                   fmt(b0, 32, "%.2fx", tg / tt), same, rel_rmse(dt, x, blk, y, nrows * ROW),
                   rel_rmse(dt, x, blk2, y, nrows * ROW));
        }
    }
    free(x);
    free(y);
    free(y2);
    free(blk);
    free(blk2);
    dlclose(h);
    if (failed) {
        fprintf(stderr, "bench_ggml_quant: tensorbox's dequantized values differ from ggml's "
                        "(see above)\n");
        return 1;
    }
    return 0;
}
