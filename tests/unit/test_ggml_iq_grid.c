/*
 * test_ggml_iq_grid.c - what the row quantizers of ggml's codebook types (src/quant/
 * ggml_iq_grid.c: iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m) promise beyond ggml's
 * bytes (which tests/unit/test_ggml_rows_vs_ggml.c checks for every row quantizer):
 *   - the lattice tables are built on first use: the first test uses every type from several
 *     threads at once and must give the bytes one thread gives (TBX_TEST_LABEL_THREADS: also
 *     run under ThreadSanitizer);
 *   - tbx_ggml_quant_requires_imatrix is ggml's ggml_quantize_requires_imatrix (llama.cpp's
 *     libggml-base.so, dlopen: $TBX_GGML_LIB, else the llama_cpp package of the source tree's
 *     .venv; a missing peer is a failure, never a skip);
 *   - given no importance matrix, the types ggml refuses without one weight every column 1.
 */
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too */
#include "ggml.h"

#include <dlfcn.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>

static bool (*g_requires)(int type);

/* ggml type id, tensorbox dtype, block bytes */
static const struct iqt {
    const char *name;
    int gid;
    tbx_dtype dt;
    size_t bytes;
} T[] = {
    {"iq2_xxs", 16, TBX_DT_IQ2_XXS, 66}, {"iq2_xs", 17, TBX_DT_IQ2_XS, 74},
    {"iq3_xxs", 18, TBX_DT_IQ3_XXS, 98}, {"iq1_s", 19, TBX_DT_IQ1_S, 50},
    {"iq3_s", 21, TBX_DT_IQ3_S, 110},    {"iq2_s", 22, TBX_DT_IQ2_S, 82},
    {"iq1_m", 29, TBX_DT_IQ1_M, 56},
};
#define NT (sizeof T / sizeof T[0])

static int load_ggml(void) {
    static int state; /* 0 untried, 1 loaded, -1 failed */
    if (state) return state > 0;
    state = -1;
    char path[4096];
    const char *lib = getenv("TBX_GGML_LIB");
    if (lib && *lib) {
        snprintf(path, sizeof path, "%s", lib);
    } else {
        const char *root = getenv("TBX_SOURCE_DIR");
        char pat[2048];
        snprintf(pat, sizeof pat,
                 "%s/.venv/lib/python3*/site-packages/llama_cpp/lib/libggml-base.so",
                 root ? root : ".");
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
            fprintf(stderr, "no libggml-base.so matches %s (set TBX_GGML_LIB)\n", pat);
            return 0;
        }
        snprintf(path, sizeof path, "%s", g.gl_pathv[0]);
        globfree(&g);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot load the ggml peer %s: %s\n", path, dlerror());
        return 0;
    }
    *(void **)&g_requires = dlsym(h, "ggml_quantize_requires_imatrix");
    if (!g_requires) {
        fprintf(stderr, "%s lacks ggml_quantize_requires_imatrix\n", path);
        return 0;
    }
    state = 1;
    return 1;
}

/* ---- data ---------------------------------------------------------------------------------- */
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static double U(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}
static float G(void) {
    double u = U(), v = U();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

enum { NKINDS = 26 };
/* Row `kind` of n values. */
static void fill(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        const float g = G();
        float v;
        switch (kind) {
        case 0: v = g; break;
        case 1: v = g * 0.02f; break;
        case 2: v = g * 300; break;
        case 3: v = (float)U(); break;
        case 4: v = 0; break;
        case 5: v = -0.0f; break;
        case 6: v = 1.0f; break;
        case 7: v = -2.5f; break;
        case 8: v = g * 1e4f; break;
        case 9: v = g * 1e-4f; break;
        case 10: v = g * 1e-8f; break;
        case 11: v = g * 1e-30f; break;
        case 12: v = 1e-40f; break;                                /* subnormal */
        case 13: v = -1 + 2.0f * (float)i / (float)(n - 1); break; /* ramp */
        case 14: v = (i % 2) ? 1.f : -1.f; break;
        case 15: v = g * g * g; break;                             /* heavy tails */
        case 16: v = i == n / 3 ? 1.f : 0.f; break;
        case 17: v = i == 1 ? -3.f : 3.f; break;
        case 18: v = i == 5 ? 1e6f : i == n - 1 ? 1e3f : g; break; /* outliers */
        case 19: v = (float)(int)(g * 2) * 0.5f; break;            /* many ties */
        case 20: v = g * 6e4f; break;
        case 21: v = i % 16 < 3 ? 0.f : g; break;
        case 22: v = (float)U() * 1e-7f; break;
        case 23: v = i % 32 == 7 ? 5.f : g * 1e-3f; break;
        case 24: v = (i / 32) % 2 ? 0.f : g; break;                /* zero sub-blocks */
        default: v = (float)(i % 3) - 1; break;                    /* -1, 0, 1 */
        }
        x[i] = v;
    }
}

/* rows: NKINDS edge rows, then `extra` random rows of random scale (some with an outlier) */
static float *make_rows(int n, int extra, int *nrows) {
    const int nr = NKINDS + extra;
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)nr);
    if (!x) return NULL;
    for (int r = 0; r < nr; r++) {
        float *xr = x + (size_t)r * (size_t)n;
        if (r < NKINDS) {
            fill(xr, n, r);
            continue;
        }
        fill(xr, n, (int)(U() * 4) == 0 ? 15 : 0);
        const float sc = (float)pow(10.0, U() * 8 - 4);
        for (int i = 0; i < n; i++) xr[i] *= sc;
        if (U() < 0.3) xr[(int)(U() * n)] *= 50;
    }
    *nrows = nr;
    return x;
}

/* ---- tests --------------------------------------------------------------------------------- */
typedef struct tjob {
    const float *x;
    int nrows, n, first;
    uint8_t *out[NT];
} tjob;

static void *tmain(void *arg) {
    tjob *j = arg;
    for (size_t k = 0; k < NT; k++) {
        const size_t t = (k + (size_t)j->first) % NT; /* each thread in another order */
        tbx_ggml_quant_rows_for(T[t].dt)(j->x, j->out[t], j->nrows, j->n, NULL);
    }
    return NULL;
}

/* First use of every lattice from four threads at once: the bytes one thread gives. */
TBX_TEST(first_use_from_threads_gives_the_same_bytes) {
    enum { NTH = 4, N = 256 };
    int nrows;
    float *x = make_rows(N, 8, &nrows);
    CHECK(x != NULL);
    if (!x) return;
    tjob jobs[NTH + 1];
    pthread_t th[NTH];
    for (int t = 0; t <= NTH; t++) {
        jobs[t].x = x;
        jobs[t].nrows = nrows;
        jobs[t].n = N;
        jobs[t].first = t;
        for (size_t k = 0; k < NT; k++)
            jobs[t].out[k] = calloc((size_t)nrows, T[k].bytes);
    }
    for (int t = 0; t < NTH; t++) CHECK_EQ(pthread_create(&th[t], NULL, tmain, &jobs[t]), 0);
    for (int t = 0; t < NTH; t++) pthread_join(th[t], NULL);
    tmain(&jobs[NTH]); /* again, tables built */
    for (size_t k = 0; k < NT; k++)
        for (int t = 0; t < NTH; t++)
            CHECK(memcmp(jobs[t].out[k], jobs[NTH].out[k], (size_t)nrows * T[k].bytes) == 0);
    for (int t = 0; t <= NTH; t++)
        for (size_t k = 0; k < NT; k++) free(jobs[t].out[k]);
    free(x);
}

TBX_TEST(the_types_ggml_refuses_without_imatrix_are_tensorboxs) {
    CHECK(load_ggml());
    if (!load_ggml()) return;
    for (size_t t = 0; t < NT; t++) {
        CHECK_EQ(tbx_ggml_quant_requires_imatrix(T[t].dt), g_requires(T[t].gid));
        CHECK(tbx_ggml_quant_rows_for(T[t].dt) != NULL);
    }
    CHECK(!tbx_ggml_quant_requires_imatrix(TBX_DT_Q4_K));
}

/* The types ggml refuses without an importance matrix weight every column 1 given NULL. */
TBX_TEST(null_weights_of_the_refused_types_are_ones) {
    enum { N = 512 };
    int nrows;
    float *x = make_rows(N, 4, &nrows);
    float *ones = malloc(sizeof(float) * N);
    CHECK(x && ones);
    if (!x || !ones) return;
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    for (size_t t = 0; t < NT; t++) {
        if (!tbx_ggml_quant_requires_imatrix(T[t].dt)) continue;
        const size_t nb = 2 * T[t].bytes * (size_t)nrows;
        uint8_t *a = malloc(nb), *b = malloc(nb);
        tbx_ggml_quant_rows_for(T[t].dt)(x, a, nrows, N, NULL);
        tbx_ggml_quant_rows_for(T[t].dt)(x, b, nrows, N, ones);
        CHECK(memcmp(a, b, nb) == 0);
        free(a);
        free(b);
    }
    free(x);
    free(ones);
}

TBX_TEST_MAIN()
