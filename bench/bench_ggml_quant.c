/*
 * bench_ggml_quant.c - throughput of the ggml block kernels (src/quant/ggml*.c).
 *
 *   bench_ggml_quant [--mb N] [--reps R] [--only TYPE[,TYPE...]] [--no-dequant] [--no-quant]
 *                    [--wall] [--best]
 *
 * Dequantizers: GB/s of f32 output written, per path (scalar, avx2, avx512 when the CPU has
 * them). Quantizers: GB/s of f32 input read, for tensorbox's encoder (best path and scalar) and,
 * for the K types, ggml's reference algorithm; plus the RMSE of both relative to the data's RMS
 * (N(0,1) data). Every figure is the median of R runs (default 7) over N MiB of f32 (default 32),
 * timed by the thread's CPU time (--wall: wall-clock time; --best: the fastest run instead of
 * the median). Single-threaded.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "ggml.h"
#include "tensorbox.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU time of this thread: on a busy shared machine wall time also counts the time spent
 * waiting for a CPU. --wall switches to wall-clock time. */
static int use_wall;
static double now(void) {
    struct timespec ts;
    clock_gettime(use_wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
/* --best: report the fastest run instead of the median (for a machine shared with other work) */
static int use_best;
static double summarize(double *v, int n) {
    if (!use_best) return median(v, n);
    double m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

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
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static int selected(const char *only, const char *name) {
    if (!only) return 1;
    const size_t n = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* Median GB/s of f(src, dst, nblocks) for `bytes` bytes moved. */
typedef void (*kern)(const void *, void *, uint64_t);
static double time_dequant(tbx_dequant_fn f, const void *src, float *dst, uint64_t nb,
                           double bytes, int reps) {
    double r[64];
    f(src, dst, nb); /* warm up: page in */
    for (int i = 0; i < reps; i++) {
        const double t0 = now();
        f(src, dst, nb);
        r[i] = bytes / (now() - t0) / 1e9;
    }
    return summarize(r, reps);
}
static double time_quant(tbx_quant_fn f, const float *src, void *dst, uint64_t nb, double bytes,
                         int reps) {
    double r[64];
    f(src, dst, nb);
    for (int i = 0; i < reps; i++) {
        const double t0 = now();
        f(src, dst, nb);
        r[i] = bytes / (now() - t0) / 1e9;
    }
    return summarize(r, reps);
}

static double rel_rmse(tbx_dtype dt, const float *x, const void *blk, float *y, uint64_t nb) {
    const tbx_dtype_info *in = tbx_dtype_get(dt);
    tbx_ggml_dequant_scalar_for(dt)(blk, y, nb);
    double e = 0, s = 0;
    for (uint64_t i = 0; i < nb * in->block_size; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        s += (double)x[i] * x[i];
    }
    return sqrt(e / s);
}

int main(int argc, char **argv) {
    double mb = 32;
    int reps = 7, do_dq = 1, do_q = 1;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--no-dequant")) do_dq = 0;
        else if (!strcmp(argv[i], "--no-quant")) do_q = 0;
        else if (!strcmp(argv[i], "--wall")) use_wall = 1;
        else if (!strcmp(argv[i], "--best")) use_best = 1;
        else {
            fprintf(stderr, "usage: %s [--mb N] [--reps R] [--only t1,t2] [--no-dequant] [--no-quant] [--wall] [--best]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    const unsigned isa = tbx_ggml_cpu_isa();
    printf("bench_ggml_quant: %.0f MiB of f32 per kernel, %s of %d runs (%s time), cpu:%s%s\n",
           mb, use_best ? "best" : "median", reps, use_wall ? "wall" : "cpu",
           isa & TBX_GGML_ISA_AVX2 ? " avx2" : "",
           isa & TBX_GGML_ISA_AVX512 ? " avx512" : "");

    const uint64_t nvals = ((uint64_t)(mb * 1048576.0 / 4) / 256) * 256;
    float *x = xmalloc(nvals * 4), *y = xmalloc(nvals * 4);
    uint8_t *blk = xmalloc(nvals * 2 + 4096); /* >= bytes of any block type for nvals */
    for (uint64_t i = 0; i < nvals; i++) x[i] = (float)gauss();

    static const tbx_dtype all[] = {
        TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q5_0, TBX_DT_Q5_1, TBX_DT_Q8_0, TBX_DT_Q8_1,
        TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K, TBX_DT_Q8_K,
        TBX_DT_IQ2_XXS, TBX_DT_IQ2_XS, TBX_DT_IQ2_S, TBX_DT_IQ3_XXS, TBX_DT_IQ3_S, TBX_DT_IQ1_S,
        TBX_DT_IQ1_M, TBX_DT_IQ4_NL, TBX_DT_IQ4_XS, TBX_DT_TQ1_0, TBX_DT_TQ2_0, TBX_DT_MXFP4,
        TBX_DT_NVFP4, TBX_DT_Q1_0, TBX_DT_Q2_0,
    };
    const size_t ntypes = sizeof all / sizeof *all;

    if (do_dq) {
        printf("\ndequantize (GB/s of f32 written)\n%-8s %8s %8s %8s %8s\n", "type", "scalar",
               "avx2", "avx512", "speedup");
        for (size_t t = 0; t < ntypes; t++) {
            const tbx_dtype_info *in = tbx_dtype_get(all[t]);
            if (!in || !selected(only, in->name)) continue;
            const uint64_t nb = nvals / in->block_size;
            /* random blocks with ordinary scales: quantize where possible, else random bytes */
            for (uint64_t i = 0; i < nb * in->block_bytes; i++) blk[i] = (uint8_t)rnd64();
            tbx_quant_fn q = tbx_ggml_quant_for(all[t]);
            if (q) q(x, blk, nb);
            const double bytes = (double)nb * in->block_size * 4;
            const double s = time_dequant(tbx_ggml_dequant_scalar_for(all[t]), blk, y, nb, bytes, reps);
            double a2 = 0, a5 = 0;
            tbx_dequant_fn f2 = tbx_ggml_dequant_avx2_for(all[t]), f5 = tbx_ggml_dequant_avx512_for(all[t]);
            if (f2 && (isa & TBX_GGML_ISA_AVX2)) a2 = time_dequant(f2, blk, y, nb, bytes, reps);
            if (f5 && (isa & TBX_GGML_ISA_AVX512)) a5 = time_dequant(f5, blk, y, nb, bytes, reps);
            const double best = a5 > a2 ? a5 : a2;
            char c2[16] = "-", c5[16] = "-", sp[16] = "-";
            if (a2 > 0) snprintf(c2, sizeof c2, "%.2f", a2);
            if (a5 > 0) snprintf(c5, sizeof c5, "%.2f", a5);
            if (best > 0) snprintf(sp, sizeof sp, "%.2fx", best / s);
            printf("%-8s %8.2f %8s %8s %8s\n", in->name, s, c2, c5, sp);
        }
    }

    if (do_q) {
        printf("\nquantize (GB/s of f32 read; rmse relative to rms, N(0,1) data)\n"
               "%-8s %9s %9s %9s %10s %10s\n",
               "type", "tensorbox", "scalar", "ggml-ref", "rmse", "rmse-ref");
        for (size_t t = 0; t < ntypes; t++) {
            const tbx_dtype_info *in = tbx_dtype_get(all[t]);
            tbx_quant_fn qb = tbx_ggml_quant_for(all[t]);
            if (!in || !qb || !selected(only, in->name)) continue;
            const uint64_t nb = nvals / in->block_size;
            const double bytes = (double)nvals * 4;
            tbx_quant_fn qs = tbx_ggml_quant_scalar_for(all[t]), qr = tbx_ggml_quant_ref_for(all[t]);
            const int is_k = qr != qb && qr != qs;
            const double gb = time_quant(qb, x, blk, nb, bytes, reps);
            const double e = rel_rmse(all[t], x, blk, y, nb);
            const double gs = qs != qb ? time_quant(qs, x, blk, nb, bytes, reps) : gb;
            double gr = 0, er = 0;
            if (is_k) {
                /* the reference encoder is slow: time it on a slice */
                const uint64_t nbr = nb / 8 ? nb / 8 : nb;
                gr = time_quant(qr, x, blk, nbr, (double)nbr * in->block_size * 4, reps < 3 ? reps : 3);
                qr(x, blk, nb);
                er = rel_rmse(all[t], x, blk, y, nb);
            }
            if (is_k)
                printf("%-8s %9.3f %9.3f %9.3f %10.5f %10.5f\n", in->name, gb, gs, gr, e, er);
            else
                printf("%-8s %9.3f %9.3f %9s %10.5f %10s\n", in->name, gb, gs, "-", e, "-");
        }
    }
    free(x);
    free(y);
    free(blk);
    return 0;
}
