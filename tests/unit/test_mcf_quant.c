/* test_mcf_quant.c - MCF q / k quantizers (both methods), the SIMD row decoders against the
 * scalar reference, and the int8 / int4 family.
 *
 * Expected values come from ../shared/specs/NOTES.md (payload sizes, bit-packing vectors) or
 * are worked out by hand below, never from tensorbox's own output. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "tbx_test.h"

#include "api.h"
#include "ggml.h"
#include "mcfq.h"

#include <math.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd64(void) {
    uint64_t x = rng_state;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}
static float urand(void) { return (float)((rnd64() >> 40) * (1.0 / 16777216.0)); }
static float gauss(void) {
    float u = urand(), v = urand();
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static const char *KN[] = { "q8", "q4", "k6", "k4", "k3", "k2" };

typedef struct payload {
    tbx_mcfq_layout L;
    uint8_t *p;
} payload;

static payload pl_new(tbx_mcfq_kind k, uint64_t rows, uint64_t cols) {
    payload P;
    CHECK_OK(tbx_mcfq_layout_get(k, rows, cols, &P.L));
    P.p = calloc(1, P.L.total + 64);
    return P;
}
static void quant(payload *P, tbx_mcfq_method m, const float *x, float lo, float hi) {
    tbx_mcfq_quantize_rows(&P->L, m, x, P->L.rows, lo, hi, P->p + P->L.scales_off,
                           P->L.super ? P->p + P->L.sub_off : NULL, P->p + P->L.codes_off);
}
static void deq(const payload *P, float *y) {
    tbx_mcfq_dequant_rows_ref(&P->L, P->p + P->L.scales_off,
                              P->L.super ? P->p + P->L.sub_off : NULL, P->p + P->L.codes_off,
                              P->L.rows, y);
}

/* NOTES: payload sizes of a 2x40 tensor */
TBX_TEST(layout_sizes_2x40) {
    static const uint64_t want[] = { 192, 128, 224, 192, 176, 160 };
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
        tbx_mcfq_layout L;
        CHECK_OK(tbx_mcfq_layout_get((tbx_mcfq_kind)k, 2, 40, &L));
        CHECK_EQ(L.total, want[k]);
    }
    tbx_mcfq_layout L;
    CHECK_EQ(tbx_mcfq_layout_get(TBX_MCFQ_K2, UINT64_MAX / 2, 1u << 20, &L), TBX_E_OVERFLOW);
}

/* NOTES' bit-packing vectors, produced by the quantizer: a block whose largest |value| is qmax
 * has scale 1 (k: S = 1, u6 = 32), so the codes are the values themselves. */
TBX_TEST(packing_vectors) {
    struct { tbx_mcfq_kind k; float v[8]; int nv; uint8_t want[3]; int nw; } c[] = {
        { TBX_MCFQ_K3, { 1, -1, 2, -3, 0, 3, -2, 1 }, 8, { 0xb9, 0x8a, 0x39 }, 3 },
        { TBX_MCFQ_K6, { 1, -1, 31, -31 }, 4, { 0xc1, 0xff, 0x85 }, 3 },
        { TBX_MCFQ_K2, { 1, -1, 0, 1 }, 4, { 0x4d }, 1 },
        { TBX_MCFQ_Q4, { 3, -7 }, 2, { 0x93 }, 1 },
        { TBX_MCFQ_K4, { 3, -7 }, 2, { 0x93 }, 1 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        for (int m = 0; m < 2; m++) {
            float x[32] = { 0 };
            memcpy(x, c[i].v, sizeof(float) * (size_t)c[i].nv);
            payload P = pl_new(c[i].k, 1, 32);
            quant(&P, (tbx_mcfq_method)m, x, -1e30f, 1e30f);
            for (int j = 0; j < c[i].nw; j++) CHECK_EQ(P.p[P.L.codes_off + (uint64_t)j], c[i].want[j]);
            /* scale 1.0 = f16 0x3C00 (q), super scale 1.0 and u6 32 (k) */
            CHECK_EQ(tbx_ld16(P.p), 0x3C00);
            if (P.L.super) CHECK_EQ(P.p[P.L.sub_off], 32);
            float y[32];
            deq(&P, y);
            for (int j = 0; j < 32; j++) CHECK(y[j] == x[j]);
            free(P.p);
        }
    }
}

/* mantle's f16 conversion truncates; the decoder flushes subnormals */
TBX_TEST(f16_rules) {
    CHECK_EQ(tbx_mcfq_f16_trunc(1.0f), 0x3C00);
    CHECK_EQ(tbx_mcfq_f16_trunc(1.0f + 1.0f / 1024 - 1e-7f), 0x3C00);  /* nearest would be 0x3C01 */
    CHECK_EQ(tbx_mcfq_f16_trunc(0.1f), 0x2E66);                        /* nearest: 0x2E66 too */
    CHECK_EQ(tbx_mcfq_f16_trunc(1.0f / 3.0f), 0x3555);
    CHECK_EQ(tbx_mcfq_f16_trunc(3e-5f), 0x0000);                       /* below 2^-14: zero */
    CHECK_EQ(tbx_mcfq_f16_trunc(-3e-5f), 0x8000);
    CHECK_EQ(tbx_mcfq_f16_trunc(70000.0f), 0x7C00);
    CHECK_EQ(tbx_mcfq_f16_trunc(NAN), 0x7E00);
    CHECK(tbx_mcfq_f16_dec(0x0001) == 0.0f && tbx_mcfq_f16_dec(0x03FF) == 0.0f);
    CHECK(tbx_mcfq_f16_dec(0x0400) == 6.103515625e-05f);
}

/* METHOD_MANTLE on a worked example: q8 block with amax 2.54 -> scale 0.02 (f32), stored
 * truncated; codes round(v / 0.02) against the unrounded scale */
TBX_TEST(mantle_q8_worked) {
    float x[40];
    for (int i = 0; i < 40; i++) x[i] = 0;
    x[0] = 2.54f; x[1] = -0.061f; x[2] = 0.029f; x[3] = -2.6f; /* clipped to -2.54 */
    x[33] = 1.0f;
    payload P = pl_new(TBX_MCFQ_Q8, 1, 40);
    quant(&P, TBX_MCFQ_METHOD_MANTLE, x, -2.54f, 2.54f);
    const float s0 = 2.54f / 127.0f;
    CHECK_EQ(tbx_ld16(P.p), tbx_mcfq_f16_trunc(s0));
    const int8_t *q = (const int8_t *)(P.p + P.L.codes_off);
    CHECK_EQ(q[0], 127);
    CHECK_EQ(q[1], -3); /* -0.061 / 0.02 = -3.05 */
    CHECK_EQ(q[2], 1);  /* 0.029 / 0.02 = 1.45 */
    CHECK_EQ(q[3], -127);
    /* block 1: amax 1.0, scale 1/127, value at column 33 -> code 127, padding codes 0 */
    CHECK_EQ(q[32 + 1], 127);
    for (int i = 8; i < 32; i++) CHECK_EQ(q[32 + i], 0);
    free(P.p);
}

/* k: u6 = round(32 * s_b / S) in [1, 63], 0 for an all-zero block; super scale = max s_b */
TBX_TEST(mantle_k_subscales) {
    float x[256 + 64] = { 0 };
    /* block j of the first super-block has amax (j+1); block 2 stays zero */
    for (int j = 0; j < 8; j++) if (j != 2) x[32 * j + 5] = (float)(j + 1);
    x[256 + 3] = -0.001f; /* second super-block: one block, tiny */
    payload P = pl_new(TBX_MCFQ_K4, 1, 256 + 64);
    quant(&P, TBX_MCFQ_METHOD_MANTLE, x, -8.0f, 8.0f);
    CHECK_EQ(tbx_ld16(P.p), tbx_mcfq_f16_trunc(8.0f / 7.0f));
    for (int j = 0; j < 8; j++)
        CHECK_EQ(P.p[P.L.sub_off + (uint64_t)j], j == 2 ? 0 : (int)lround(32.0 * (j + 1) / 8.0));
    CHECK_EQ(P.p[P.L.sub_off + 8], 32);
    CHECK_EQ(P.p[P.L.sub_off + 9], 0);
    free(P.p);
}

static double rmse(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(e / (double)n);
}

/* METHOD_BEST has a lower error than METHOD_MANTLE on every kind, Gaussian and outliers */
TBX_TEST(best_beats_mantle) {
    const uint64_t rows = 16, cols = 1000;
    float *x = malloc(sizeof(float) * rows * cols), *y = malloc(sizeof(float) * rows * cols);
    for (int dist = 0; dist < 2; dist++) {
        float amax = 0;
        for (uint64_t i = 0; i < rows * cols; i++) {
            x[i] = 0.02f * gauss();
            if (dist == 1 && rnd64() % 100 == 0) x[i] *= 30.0f; /* 1% outliers */
            if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
        }
        for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
            double e[2];
            for (int m = 0; m < 2; m++) {
                payload P = pl_new((tbx_mcfq_kind)k, rows, cols);
                quant(&P, (tbx_mcfq_method)m, x, -amax, amax);
                deq(&P, y);
                e[m] = rmse(x, y, rows * cols);
                free(P.p);
            }
            if (!(e[0] < e[1]))
                fprintf(stderr, "%s dist %d: best %.6g mantle %.6g\n", KN[k], dist, e[0], e[1]);
            CHECK(e[0] < e[1]);
            CHECK(e[0] > 0);
        }
    }
    free(x);
    free(y);
}

/* Rows are independent: quantizing rows one at a time gives the same bytes. */
TBX_TEST(rows_independent) {
    const uint64_t rows = 5, cols = 300;
    float x[5 * 300];
    for (size_t i = 0; i < rows * cols; i++) x[i] = gauss();
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
        payload A = pl_new((tbx_mcfq_kind)k, rows, cols), B = pl_new((tbx_mcfq_kind)k, rows, cols);
        quant(&A, TBX_MCFQ_METHOD_BEST, x, -5, 5);
        const tbx_mcfq_layout *L = &B.L;
        for (uint64_t r = 0; r < rows; r++)
            tbx_mcfq_quantize_rows(L, TBX_MCFQ_METHOD_BEST, x + r * cols, 1, -5, 5,
                                   B.p + L->scales_off + 2 * r * (L->super ? L->spr : L->bpr),
                                   L->super ? B.p + L->sub_off + r * L->bpr : NULL,
                                   B.p + L->codes_off + r * L->row_code_bytes);
        CHECK(memcmp(A.p, B.p, A.L.total) == 0);
        free(A.p);
        free(B.p);
    }
}

/* Non-finite input: defined bytes, finite scales for BEST, no crash (UBSan checks the casts) */
TBX_TEST(nonfinite_input) {
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = gauss();
    x[3] = NAN; x[40] = INFINITY; x[41] = -INFINITY; x[42] = 1e-40f;
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++)
        for (int m = 0; m < 2; m++) {
            payload P = pl_new((tbx_mcfq_kind)k, 1, 64);
            quant(&P, (tbx_mcfq_method)m, x, -INFINITY, INFINITY);
            quant(&P, (tbx_mcfq_method)m, x, -3.0f, 3.0f);
            if (m == 0) {
                float y[64];
                deq(&P, y);
                for (int i = 0; i < 64; i++) CHECK(isfinite(y[i]));
            }
            free(P.p);
        }
    /* a block of subnormals only: mantle's 1/scale is infinite (codes saturate as Go's do) */
    float s[32];
    for (int i = 0; i < 32; i++) s[i] = (i & 1 ? -1 : 1) * 1e-39f;
    payload P = pl_new(TBX_MCFQ_Q8, 1, 32);
    quant(&P, TBX_MCFQ_METHOD_MANTLE, s, -1e-39f, 1e-39f);
    CHECK_EQ(tbx_ld16(P.p), 0);
    CHECK_EQ((int8_t)P.p[P.L.codes_off], -127); /* Go: int32(+Inf) = INT32_MIN -> -qmax */
    free(P.p);
}

/* ---- SIMD decoders against the scalar reference -------------------------------------------- */
static void fill_edge(uint8_t *p, size_t n, int mode) {
    static const uint16_t sp[] = { 0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7C00, 0xFC00,
                                   0x7C01, 0x7E00, 0xFE55, 0x7BFF, 0x3C00, 0xBC00 };
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd64();
    if (mode == 1) /* special f16 values in every scale slot */
        for (size_t i = 0; i + 1 < n; i += 2)
            tbx_st16(p + i, sp[rnd64() % (sizeof sp / sizeof sp[0])]);
}

TBX_TEST(simd_matches_reference) {
    static const uint64_t shapes[][2] = { { 1, 32 }, { 3, 40 }, { 2, 1 }, { 4, 31 }, { 2, 256 },
                                          { 3, 273 }, { 1, 1000 }, { 7, 64 } };
    tbx_mcfq_rows_fn f[2] = { tbx_mcfq_dequant_avx2_for(TBX_MCFQ_Q8), tbx_mcfq_dequant_simd_for(TBX_MCFQ_Q8) };
    int tested = 0;
    for (int v = 0; v < 2; v++) {
        if (!f[v]) continue;
        if (v == 0 && !(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2)) continue;
        for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                for (int mode = 0; mode < 3; mode++) {
                    payload P = pl_new((tbx_mcfq_kind)k, shapes[s][0], shapes[s][1]);
                    const tbx_mcfq_layout *L = &P.L;
                    if (mode == 2) { /* real quantized data, both methods mixed by row */
                        float *x = malloc(sizeof(float) * L->rows * L->cols);
                        for (uint64_t i = 0; i < L->rows * L->cols; i++) x[i] = gauss();
                        quant(&P, TBX_MCFQ_METHOD_BEST, x, -4, 4);
                        free(x);
                    } else {
                        fill_edge(P.p + L->scales_off, (size_t)L->scales_size, mode);
                        if (L->super) fill_edge(P.p + L->sub_off, (size_t)L->sub_size, 0); /* top bits set too */
                        fill_edge(P.p + L->codes_off, (size_t)L->codes_size, 0);
                    }
                    const size_t nv = (size_t)(L->rows * L->cols);
                    float *a = malloc(nv * 4 + 4), *b = malloc(nv * 4 + 4);
                    memset(a, 0xAB, nv * 4 + 4);
                    memset(b, 0xAB, nv * 4 + 4);
                    deq(&P, a);
                    f[v](L, P.p + L->scales_off, L->super ? P.p + L->sub_off : NULL,
                         P.p + L->codes_off, L->rows, b);
                    if (memcmp(a, b, nv * 4 + 4) != 0)
                        fprintf(stderr, "variant %d %s %llux%llu mode %d differs\n", v, KN[k],
                                (unsigned long long)L->rows, (unsigned long long)L->cols, mode);
                    CHECK(memcmp(a, b, nv * 4 + 4) == 0);
                    tested++;
                    free(a);
                    free(b);
                    free(P.p);
                }
            }
        }
    }
    /* the machines we test on have AVX2; a build without SIMD has nothing to compare */
    if (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) CHECK(tested > 0);
    else CHECK(f[1] == NULL);
}

/* the public entry gives the reference's bits too */
TBX_TEST(dequant_rows_entry) {
    payload P = pl_new(TBX_MCFQ_K3, 2, 300);
    fill_edge(P.p, (size_t)P.L.total, 0);
    float a[600], b[600];
    deq(&P, a);
    tbx_mcfq_dequant_rows(&P.L, P.p + P.L.scales_off, P.p + P.L.sub_off, P.p + P.L.codes_off, 2, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    free(P.p);
}

/* ---- int8 / int4 --------------------------------------------------------------------------- */
TBX_TEST(int_family) {
    tbx_mcfi_layout L;
    CHECK_OK(tbx_mcfi_layout_get(4, false, 5, &L));
    CHECK_EQ(L.codes_off, 64);
    CHECK_EQ(L.codes_size, 3);
    CHECK_EQ(L.total, 67);
    CHECK_OK(tbx_mcfi_layout_get(8, true, 5, &L));
    CHECK_EQ(L.zero_off, 64);
    CHECK_EQ(L.codes_off, 128);
    CHECK_EQ(L.total, 133);
    CHECK_EQ(tbx_mcfi_layout_get(3, false, 5, &L), TBX_E_INVALID_ARG);

    /* int4 weights: clip [-7, 3.5] -> scale 1, codes round(v), signed nibbles low first */
    CHECK_OK(tbx_mcfi_layout_get(4, false, 4, &L));
    float sc, z;
    tbx_mcfi_params(&L, -7.0f, 3.5f, &sc, &z);
    CHECK(sc == 1.0f && z == 0.0f);
    const float x[4] = { 3.0f, -7.0f, 9.0f, -0.4f };
    uint8_t c[2] = { 0, 0 };
    tbx_mcfi_quantize(&L, sc, z, -7.0f, 3.5f, x, 0, 4, c);
    CHECK_EQ(c[0], 0x93);             /* NOTES: [3, -7] -> 93 */
    CHECK_EQ(c[1], 0x04);             /* 9 clipped to 3.5 -> 4 (half away), -0.4 -> 0 */
    float y[4];
    tbx_mcfi_dequant(&L, sc, z, c, 0, 4, y);
    CHECK(y[0] == 3.0f && y[1] == -7.0f && y[2] == 4.0f && y[3] == 0.0f);

    /* int8 activations: [-1, 1.55] -> 255 levels, 0 exact */
    CHECK_OK(tbx_mcfi_layout_get(8, true, 3, &L));
    tbx_mcfi_params(&L, -1.0f, 1.55f, &sc, &z);
    CHECK(fabsf(sc - 0.01f) < 1e-7f);
    CHECK(z == -28.0f);               /* -128 + 1 / 0.01 */
    const float a[3] = { 0.0f, -1.0f, 1.55f };
    uint8_t ac[3];
    tbx_mcfi_quantize(&L, sc, z, -1.0f, 1.55f, a, 0, 3, ac);
    CHECK_EQ((int8_t)ac[0], -28);
    CHECK_EQ((int8_t)ac[1], -128);
    CHECK_EQ((int8_t)ac[2], 127);
    tbx_mcfi_dequant(&L, sc, z, ac, 0, 3, y);
    CHECK(y[0] == 0.0f);
    CHECK(fabsf(y[1] + 1.0f) < 1e-5f && fabsf(y[2] - 1.55f) < 1e-5f);
}

/* ---- the conversion (tbx_convert to MCF: the engine's payload encoders) ------------------- */
/* A one-tensor safetensors file, written byte by byte. */
static void st_write(const char *path, const char *dtype, uint64_t rows, uint64_t cols,
                     const void *data, size_t nbytes) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"w\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"data_offsets\":[0,%zu]}}",
                     dtype, (unsigned long long)rows, (unsigned long long)cols, nbytes);
    while (n % 8) hdr[n++] = ' ';
    FILE *f = fopen(path, "wb");
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    fwrite(data, 1, nbytes, f);
    fclose(f);
}

/* MCF's raw int family after the q / k kinds (the loop below runs over all eight) */
#define KIND_INT8 ((unsigned)TBX_MCFQ_KIND_COUNT)
#define KIND_INT4 ((unsigned)TBX_MCFQ_KIND_COUNT + 1)

typedef struct qrec { uint64_t nvalues; double sse; int calls; } qrec;
static void on_quant(void *ud, uint64_t tensor, uint64_t nvalues, double sse) {
    qrec *r = ud;
    (void)tensor;
    r->nvalues = nvalues;
    r->sse = sse;
    r->calls++;
}

/* Converts the one-tensor file `path` to MCF family `kind` (clip given: lo..hi, else the
 * scan's), with `threads` threads, through tbx_convert (the engine); *payload gets the
 * tensor's stored bytes (malloc), *lo / *hi the clip range its QuantInfo records. */
static void convert_once(const char *path, unsigned kind, int method, bool clip, float clo,
                         float chi, const char *threads, uint8_t **payload, size_t *len,
                         qrec *r, double *lo, double *hi) {
    char out[600];
    tbx_test_tmppath(out, sizeof out, "mcfq_conv_%d.mcf", (int)getpid());
    setenv("TBX_THREADS", threads, 1);
    tbx_file *f = NULL;
    tbx_error err;
    *payload = NULL;
    *len = 0;
    memset(r, 0, sizeof *r);
    CHECK_OK(tbx_open_path(&f, path, NULL, &err));
    if (f) {
        tbx_convert_options o;
        tbx_convert_options_init(&o);
        o.write.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
        o.quant_to = kind < TBX_MCFQ_KIND_COUNT ? (tbx_dtype)(TBX_DT_MCF_Q8 + kind)
                     : kind == KIND_INT8 ? TBX_DT_MCF_INT8 : TBX_DT_MCF_INT4;
        /* the method and clip range: MCF's write options */
        tbx_value *opts = tbx_value_new_map();
        if (method)
            CHECK_OK(tbx_value_map_put(opts, "quant_method", 12,
                                       tbx_value_new_string("mantle", 6)));
        if (clip) {
            CHECK_OK(tbx_value_map_put(opts, "quant_clip_min", 14,
                                       tbx_value_new_float(TBX_V_F32, clo)));
            CHECK_OK(tbx_value_map_put(opts, "quant_clip_max", 14,
                                       tbx_value_new_float(TBX_V_F32, chi)));
        }
        o.write.options = opts;
        o.on_quant = on_quant;
        o.progress_ud = r;
        CHECK_OK(tbx_convert(f, out, &o, &err));
        tbx_value_free(opts);
    }
    tbx_close(f);
    unsetenv("TBX_THREADS");
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, out, NULL, &err));
    if (!g) return;
    uint64_t i = 0;
    CHECK_OK(tbx_tensor_find(g, "w", &i));
    tbx_tensor_read(g, i, NULL, 0, len, &err); /* the size */
    *payload = malloc(*len + 1);
    CHECK_OK(tbx_tensor_read(g, i, *payload, *len, NULL, &err));
    tbx_quant_info q;
    memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    CHECK_OK(tbx_tensor_quant_get(g, i, &q));
    CHECK(q.has_clip);
    *lo = q.clip_min;
    *hi = q.clip_max;
    tbx_close(g);
    remove(out);
}

/* The payload equals the kernels' output on the whole tensor with clip +-max|finite value|,
 * whatever the thread count; f16 input decodes first; the error sum matches. */
TBX_TEST(convert_tensor_threads) {
    const uint64_t rows = 37, cols = 9001; /* several chunks, partial blocks, odd cols */
    const size_t nv = (size_t)(rows * cols);
    float *x = malloc(nv * 4), *y = malloc(nv * 4);
    uint16_t *h = malloc(nv * 2);
    float amax = 0;
    for (size_t i = 0; i < nv; i++) {
        x[i] = 0.05f * gauss();
        if (i == 12345) x[i] = NAN;
        if (i == 777) x[i] = INFINITY;
        if (isfinite(x[i]) && fabsf(x[i]) > amax) amax = fabsf(x[i]);
    }
    char p32[512], p16[512];
    tbx_test_tmppath(p32, sizeof p32, "mcfq_conv_%d_32.safetensors", (int)getpid());
    tbx_test_tmppath(p16, sizeof p16, "mcfq_conv_%d_16.safetensors", (int)getpid());
    st_write(p32, "F32", rows, cols, x, nv * 4);
    for (size_t i = 0; i < nv; i++) h[i] = tbx_f32_to_f16(x[i]);
    st_write(p16, "F16", rows, cols, h, nv * 2);
    for (unsigned kind = 0; kind <= KIND_INT4; kind++) {
        for (int m = 0; m < 2; m++) {
            if (kind >= KIND_INT8 && m) continue;
            /* expected: the kernels on the whole tensor */
            uint64_t total;
            tbx_mcfq_layout L;
            tbx_mcfi_layout I;
            if (kind < TBX_MCFQ_KIND_COUNT) {
                CHECK_OK(tbx_mcfq_layout_get((tbx_mcfq_kind)kind, rows, cols, &L));
                total = L.total;
            } else {
                CHECK_OK(tbx_mcfi_layout_get(kind == KIND_INT8 ? 8 : 4, false, nv, &I));
                total = I.total;
            }
            uint8_t *want = calloc(1, (size_t)total);
            double wsse = 0;
            if (kind < TBX_MCFQ_KIND_COUNT) {
                tbx_mcfq_quantize_rows(&L, (tbx_mcfq_method)m, x, rows, -amax, amax, want + L.scales_off,
                                       L.super ? want + L.sub_off : NULL, want + L.codes_off);
                tbx_mcfq_dequant_rows_ref(&L, want + L.scales_off, L.super ? want + L.sub_off : NULL,
                                          want + L.codes_off, rows, y);
            } else {
                float sc, z;
                tbx_mcfi_params(&I, -amax, amax, &sc, &z);
                memcpy(want, &sc, 4);
                tbx_mcfi_quantize(&I, sc, z, -amax, amax, x, 0, nv, want + I.codes_off);
                tbx_mcfi_dequant(&I, sc, z, want + I.codes_off, 0, nv, y);
            }
            for (size_t i = 0; i < nv; i++)
                if (isfinite(x[i])) wsse += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
            double sse1 = -1, lo, hi;
            uint8_t *got = NULL;
            size_t len = 0;
            qrec r;
            for (int th = 0; th < 3; th++) {
                convert_once(p32, kind, m, false, 0, 0, th == 0 ? "1" : th == 1 ? "2" : "4",
                             &got, &len, &r, &lo, &hi);
                CHECK_EQ(len, total);
                CHECK(lo == -amax && hi == amax);
                CHECK_EQ(r.calls, 1);
                CHECK_EQ(r.nvalues, nv);
                CHECK(got && len == total && memcmp(got, want, (size_t)total) == 0);
                if (th == 0) sse1 = r.sse;
                CHECK(r.sse == sse1); /* bit-identical sum for any thread count */
                /* the sum is the error of the decoded payload (order of summation differs) */
                CHECK(fabs(r.sse - wsse) <= 1e-9 * wsse + 1e-30);
                free(got);
            }
            /* f16 input: the decoded values are what gets quantized */
            convert_once(p16, kind, m, true, -0.1f, 0.1f, "3", &got, &len, &r, &lo, &hi);
            CHECK_EQ(len, total);
            CHECK(lo == -0.1f && hi == 0.1f); /* a given range is kept */
            free(got);
            free(want);
        }
    }
    remove(p32);
    remove(p16);
    free(x);
    free(y);
    free(h);
}

/* ---- MCF's quantization options: write options of MCF's row, read by the conversion ------- */
/* A map of the options given (NULL method / lo / hi: not given). */
static tbx_value *qopts(const char *method, const double *lo, const double *hi) {
    tbx_value *m = tbx_value_new_map();
    if (method) CHECK_OK(tbx_value_map_put(m, "quant_method", 12,
                                           tbx_value_new_string(method, strlen(method))));
    if (lo) CHECK_OK(tbx_value_map_put(m, "quant_clip_min", 14,
                                       tbx_value_new_float(TBX_V_F64, *lo)));
    if (hi) CHECK_OK(tbx_value_map_put(m, "quant_clip_max", 14,
                                       tbx_value_new_float(TBX_V_F64, *hi)));
    return m;
}

/* tbx_convert_check (in NULL) or tbx_convert of `in` to `out` with quant_to `qt`, options `m`
 * and conversion flags `flags`; a refusal leaves no output. */
static tbx_status conv_with(tbx_file *in, const char *out, tbx_dtype qt, const tbx_value *m,
                            uint32_t flags, tbx_error *e) {
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.write.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
    o.quant_to = qt;
    o.flags = flags;
    o.write.options = m;
    memset(e, 0, sizeof *e);
    remove(out);
    tbx_status st = in ? tbx_convert(in, out, &o, e) : tbx_convert_check(out, &o, e);
    if (st != TBX_OK) CHECK(access(out, F_OK) != 0);
    return st;
}

TBX_TEST(quant_options_checked) {
    char src[512], out[512];
    tbx_test_tmppath(src, sizeof src, "mcfq_opt_%d.safetensors", (int)getpid());
    tbx_test_tmppath(out, sizeof out, "mcfq_opt_%d.mcf", (int)getpid());
    float x[4 * 64];
    for (size_t i = 0; i < 4 * 64; i++) x[i] = 0.1f * gauss();
    st_write(src, "F32", 4, 64, x, sizeof x);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, src, NULL, &e));
    const double m1 = -1, p1 = 1, big = 1e39, zero = 0;
    struct {
        const char *method;
        const double *lo, *hi;
        tbx_dtype qt;
        const char *field; /* NULL: accepted */
    } cases[] = {
        /* the pair: both bounds or neither, each within f32, min <= max (the row's check) */
        {NULL, &m1, NULL, TBX_DT_MCF_K4, "options.quant_clip_max"},
        {NULL, NULL, &p1, TBX_DT_MCF_K4, "options.quant_clip_min"},
        {NULL, &p1, &m1, TBX_DT_MCF_K4, "options.quant_clip_min"},
        {NULL, &big, &p1, TBX_DT_MCF_K4, "options.quant_clip_min"},
        {NULL, &zero, &big, TBX_DT_MCF_K4, "options.quant_clip_max"},
        /* the method: one of the row's choices (core's check) */
        {"fast", NULL, NULL, TBX_DT_MCF_K4, "options.quant_method"},
        /* nothing to apply them to: no quant_to, or one that is not an MCF family */
        {"mantle", NULL, NULL, TBX_DT_INVALID, "options.quant_method"},
        {"best", NULL, NULL, TBX_DT_INVALID, "options.quant_method"},
        {NULL, &m1, &p1, TBX_DT_INVALID, "options.quant_clip_min"},
        {"mantle", NULL, NULL, TBX_DT_Q8_0, "options.quant_method"},
        /* accepted */
        {"mantle", &m1, &p1, TBX_DT_MCF_K4, NULL},
        {"best", &p1, &p1, TBX_DT_MCF_INT8, NULL},
        {NULL, NULL, NULL, TBX_DT_INVALID, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tbx_value *m = qopts(cases[i].method, cases[i].lo, cases[i].hi);
        for (int with_input = 0; with_input < 2; with_input++) {
            tbx_status st = conv_with(with_input ? f : NULL, out, cases[i].qt, m, 0, &e);
            if (!cases[i].field) {
                CHECK_OK(st);
                continue;
            }
            CHECK_EQ(st, TBX_E_INVALID_ARG);
            CHECK_STR(e.field, cases[i].field);
        }
        tbx_value_free(m);
    }
    /* the former flags and fields: refused, naming the options that replace them */
    for (uint32_t bit = 0x10; bit <= 0x20; bit <<= 1) {
        CHECK_EQ(conv_with(f, out, TBX_DT_MCF_K4, NULL, bit, &e), TBX_E_INVALID_ARG);
        CHECK_STR(e.field, "flags");
        CHECK(strstr(e.message, "quant_method") && strstr(e.message, "quant_clip_min"));
    }
    CHECK_EQ(conv_with(f, out, TBX_DT_INVALID, NULL, 0x400, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "flags");
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.quant_to = TBX_DT_MCF_K4;
    o.reserved1[1] = 1.0f;
    CHECK_EQ(tbx_convert_check(out, &o, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "reserved1");
    CHECK(strstr(e.message, "quant_clip_max") != NULL);
    CHECK_EQ(tbx_convert(f, out, &o, &e), TBX_E_INVALID_ARG);
    CHECK(access(out, F_OK) != 0);
    tbx_close(f);
    /* a writer opened by tbx_writer_open quantizes nothing: given the method or the clip
     * range, its layout refuses them (no file); without them the same tensor is written */
    for (int k = 0; k < 3; k++) {
        tbx_value *m = k == 0 ? qopts("mantle", NULL, NULL)
                       : k == 1 ? qopts(NULL, &m1, &p1) : NULL;
        tbx_write_options wo;
        tbx_write_options_init(&wo);
        wo.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
        wo.options = m;
        remove(out);
        tbx_writer *w = NULL;
        CHECK_OK(tbx_writer_open(&w, out, &wo, &e));
        CHECK_OK(tbx_writer_check(out, &wo, &e)); /* the values are fine */
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        const uint64_t shape[2] = {4, 64};
        d.name = "w";
        d.dtype = TBX_DT_F32;
        d.ndim = 2;
        d.shape = shape;
        d.has_data = 1;
        uint64_t idx = 0;
        CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &e));
        tbx_status st = tbx_writer_write_tensor(w, idx, x, sizeof x, &e);
        if (st == TBX_OK) st = tbx_writer_finish(w, &e);
        else tbx_writer_abort(w);
        if (k == 2) {
            CHECK_OK(st);
            CHECK(access(out, F_OK) == 0);
        } else {
            CHECK_EQ(st, TBX_E_INVALID_ARG);
            CHECK_STR(e.field, k == 0 ? "options.quant_method" : "options.quant_clip_min");
            CHECK(access(out, F_OK) != 0);
        }
        tbx_value_free(m);
    }
    remove(out);
    remove(src);
}

TBX_TEST_MAIN()
