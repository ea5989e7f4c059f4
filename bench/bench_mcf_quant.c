/*
 * bench_mcf_quant.c - MCF q / k kernels: dequantization speed beside memcpy, quantization speed
 * and error of both methods; also a filter used by tests/python/test_mcf_quant.py.
 *
 *   bench_mcf_quant speed [REPS] [IN.f32 SHAPES]
 *       Gaussian data (or the rows of IN.f32: raw little-endian f32 tensors one after another,
 *       SHAPES = "r1xc1,r2xc2,..."), one line per kind: JSON with medians of REPS runs of
 *       dequant (reference and dispatched decoder, GB/s of f32 written), memcpy of the same
 *       f32 bytes, quantize (both methods, MB/s of f32 read) and RMSE of both methods.
 *   bench_mcf_quant quantize KIND METHOD ROWS COLS CLIP_LO CLIP_HI  < f32 > payload
 *   bench_mcf_quant dequant KIND ROWS COLS < payload > f32     (scalar reference decoder)
 *
 * Single-threaded. KIND: q8 q4 k6 k4 k3 k2; METHOD: best mantle.
 */
#define _POSIX_C_SOURCE 200809L
#include "ggml.h"
#include "mcfq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *KN[] = { "q8", "q4", "k6", "k4", "k3", "k2" };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static int kind_of(const char *s) {
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++)
        if (!strcmp(s, KN[k])) return k;
    fprintf(stderr, "unknown kind %s\n", s);
    exit(2);
}
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}
static size_t read_all(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f); }

/* One matrix of the speed run. */
typedef struct mat { uint64_t rows, cols; const float *x; } mat;

static uint64_t rng = 0x1234567887654321ull;
static float gauss(void) {
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    uint64_t a = rng * 0x2545F4914F6CDD1Dull;
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    uint64_t b = rng * 0x2545F4914F6CDD1Dull;
    double u = ((double)(a >> 11) + 1.0) / 9007199254740993.0, v = (double)(b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void speed(int reps, mat *m, int nm, const char *label) {
    uint64_t nvals = 0;
    for (int i = 0; i < nm; i++) nvals += m[i].rows * m[i].cols;
    const size_t fbytes = (size_t)nvals * 4;
    float *y = xmalloc(fbytes), *y2 = xmalloc(fbytes);
    memset(y2, 0, fbytes);
    double *t = xmalloc(sizeof(double) * (size_t)reps * 8);
    /* memcpy of the same f32 bytes (source and destination touched before timing) */
    float *src = xmalloc(fbytes);
    memset(src, 1, fbytes);
    memset(y, 0, fbytes);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        memcpy(y, src, fbytes);
        t[r] = now() - t0;
    }
    const double memcpy_gbs = (double)fbytes / median(t, reps) / 1e9;
    free(src);
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
        tbx_mcfq_layout *L = xmalloc(sizeof *L * (size_t)nm);
        uint8_t **p = xmalloc(sizeof *p * (size_t)nm);
        double q_s[2], e2[2];
        for (int meth = 0; meth < 2; meth++) {
            double se = 0;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                for (int i = 0; i < nm; i++) {
                    if (r == 0 && meth == 0) {
                        if (tbx_mcfq_layout_get((tbx_mcfq_kind)k, m[i].rows, m[i].cols, &L[i])) exit(1);
                        p[i] = xmalloc((size_t)L[i].total);
                    }
                    memset(p[i], 0, (size_t)L[i].total);
                    tbx_mcfq_quantize_rows(&L[i], (tbx_mcfq_method)meth, m[i].x, m[i].rows, -INFINITY,
                                           INFINITY, p[i] + L[i].scales_off,
                                           L[i].super ? p[i] + L[i].sub_off : NULL,
                                           p[i] + L[i].codes_off);
                }
                t[r] = now() - t0;
            }
            q_s[meth] = median(t, reps);
            /* error of this method (payload of the last rep) */
            float *o = y;
            for (int i = 0; i < nm; i++) {
                tbx_mcfq_dequant_rows_ref(&L[i], p[i] + L[i].scales_off,
                                          L[i].super ? p[i] + L[i].sub_off : NULL,
                                          p[i] + L[i].codes_off, L[i].rows, o);
                for (uint64_t j = 0; j < m[i].rows * m[i].cols; j++) {
                    double d = (double)o[j] - m[i].x[j];
                    se += d * d;
                }
                o += m[i].rows * m[i].cols;
            }
            e2[meth] = sqrt(se / (double)nvals);
        }
        /* dequantize the BEST payload (the last one quantized is mantle's: redo best) */
        for (int i = 0; i < nm; i++)
            tbx_mcfq_quantize_rows(&L[i], TBX_MCFQ_METHOD_BEST, m[i].x, m[i].rows, -INFINITY, INFINITY,
                                   p[i] + L[i].scales_off, L[i].super ? p[i] + L[i].sub_off : NULL,
                                   p[i] + L[i].codes_off);
        double d_s[2];
        for (int v = 0; v < 2; v++) {
            float *out = v ? y2 : y;
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                float *o = out;
                for (int i = 0; i < nm; i++) {
                    const uint8_t *sc = p[i] + L[i].scales_off, *su = L[i].super ? p[i] + L[i].sub_off : NULL,
                                  *co = p[i] + L[i].codes_off;
                    if (v) tbx_mcfq_dequant_rows(&L[i], sc, su, co, L[i].rows, o);
                    else tbx_mcfq_dequant_rows_ref(&L[i], sc, su, co, L[i].rows, o);
                    o += L[i].rows * L[i].cols;
                }
                t[r] = now() - t0;
            }
            d_s[v] = median(t, reps);
        }
        const int same = memcmp(y, y2, fbytes) == 0;
        printf("{\"data\": \"%s\", \"kind\": \"%s\", \"values\": %llu, \"memcpy_gbs\": %.3f, "
               "\"dequant_ref_gbs\": %.3f, \"dequant_gbs\": %.3f, \"dequant_pct_memcpy\": %.1f, "
               "\"simd_identical\": %s, \"quant_best_mbs\": %.2f, \"quant_mantle_mbs\": %.2f, "
               "\"rmse_best\": %.6g, \"rmse_mantle\": %.6g}\n",
               label, KN[k], (unsigned long long)nvals, memcpy_gbs, (double)fbytes / d_s[0] / 1e9,
               (double)fbytes / d_s[1] / 1e9, 100.0 * ((double)fbytes / d_s[1] / 1e9) / memcpy_gbs,
               same ? "true" : "false", (double)fbytes / q_s[0] / 1e6, (double)fbytes / q_s[1] / 1e6,
               e2[0], e2[1]);
        fflush(stdout);
        for (int i = 0; i < nm; i++) free(p[i]);
        free(p);
        free(L);
    }
    free(y);
    free(y2);
    free(t);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "speed")) {
        int reps = argc >= 3 ? atoi(argv[2]) : 5;
        if (reps < 1) reps = 1;
        if (argc >= 5) {
            FILE *f = fopen(argv[3], "rb");
            if (!f) { perror(argv[3]); return 1; }
            mat m[4096];
            int nm = 0;
            for (char *s = argv[4]; *s && nm < 4096;) {
                char *e;
                m[nm].rows = strtoull(s, &e, 10);
                m[nm].cols = strtoull(e + 1, &e, 10);
                size_t n = (size_t)(m[nm].rows * m[nm].cols);
                float *x = xmalloc(n * 4);
                if (read_all(f, x, n * 4) != n * 4) { fprintf(stderr, "short input\n"); return 1; }
                m[nm++].x = x;
                s = *e ? e + 1 : e;
            }
            fclose(f);
            speed(reps, m, nm, "file");
        } else {
            mat m = { 4096, 4096, NULL };
            float *x = xmalloc((size_t)(m.rows * m.cols) * 4);
            for (uint64_t i = 0; i < m.rows * m.cols; i++) x[i] = 0.02f * gauss();
            m.x = x;
            speed(reps, &m, 1, "gaussian");
        }
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "quantize")) {
        tbx_mcfq_layout L;
        const int k = kind_of(argv[2]);
        const tbx_mcfq_method meth = !strcmp(argv[3], "mantle") ? TBX_MCFQ_METHOD_MANTLE : TBX_MCFQ_METHOD_BEST;
        if (tbx_mcfq_layout_get((tbx_mcfq_kind)k, strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10), &L))
            return 1;
        const size_t n = (size_t)(L.rows * L.cols);
        float *x = xmalloc(n * 4);
        if (read_all(stdin, x, n * 4) != n * 4) { fprintf(stderr, "short input\n"); return 1; }
        uint8_t *p = calloc(1, (size_t)L.total + 1);
        tbx_mcfq_quantize_rows(&L, meth, x, L.rows, strtof(argv[6], NULL), strtof(argv[7], NULL),
                               p + L.scales_off, L.super ? p + L.sub_off : NULL, p + L.codes_off);
        fwrite(p, 1, (size_t)L.total, stdout);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "dequant")) {
        tbx_mcfq_layout L;
        if (tbx_mcfq_layout_get((tbx_mcfq_kind)kind_of(argv[2]), strtoull(argv[3], NULL, 10),
                                strtoull(argv[4], NULL, 10), &L))
            return 1;
        uint8_t *p = xmalloc((size_t)L.total);
        if (read_all(stdin, p, (size_t)L.total) != L.total) { fprintf(stderr, "short input\n"); return 1; }
        float *y = xmalloc((size_t)(L.rows * L.cols) * 4);
        tbx_mcfq_dequant_rows_ref(&L, p + L.scales_off, L.super ? p + L.sub_off : NULL, p + L.codes_off,
                                  L.rows, y);
        fwrite(y, 4, (size_t)(L.rows * L.cols), stdout);
        return 0;
    }
    fprintf(stderr, "usage: bench_mcf_quant speed [REPS] [IN.f32 SHAPES] | quantize KIND METHOD ROWS COLS "
                    "LO HI | dequant KIND ROWS COLS\n");
    return 2;
}
