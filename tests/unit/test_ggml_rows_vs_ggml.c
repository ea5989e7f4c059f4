/*
 * test_ggml_rows_vs_ggml.c - every row quantizer (tbx_ggml_quant_rows_for, src/quant/ggml.h)
 * gives the bytes of ggml_quantize_chunk of llama.cpp's own libggml-base.
 *
 * The peer is ggml itself, opened with dlopen from the path in the environment variable
 * TBX_GGML_LIB (CMake sets it for ctest from .venv's llama_cpp/lib; see CMakeLists.txt). When the
 * variable is unset or the library does not load, the test FAILS: a missing peer is never a pass.
 *
 * The types are not listed here: every dtype with a row quantizer is checked, so a type added to
 * ggml_rows.c is covered without an edit. For each: several row lengths (one block, a few, 256,
 * 512, 768, 1024, 4096 values), one row and several rows per call, random rows and edge rows
 * (zeros, signed zeros, constants, huge and tiny magnitudes, subnormals, single outliers, ramps,
 * alternating signs), without an importance matrix (unless ggml requires one) and with three
 * (random positive, random with zeros, uniform). Per type the number of calls and of differing
 * calls is printed; the first difference of each type is described.
 *
 * ggml aborts (GGML_ABORT, "point not on grid") on some rows whose squares overflow f32 (R_HUGE:
 * the codebook types' searches then see only Inf/NaN). A call holding an R_HUGE row runs ggml in
 * a child process; when the child dies, the call is compared row by row (the R_HUGE rows again
 * in a child), and an R_HUGE row ggml aborts on is counted (printed) instead of compared:
 * tensorbox must give it the same bytes twice (defined, crash-free). An abort on any other row
 * fails (it ends the test).
 */
#define _DEFAULT_SOURCE /* setenv, MAP_ANONYMOUS */
#include "tbx_test.h"

#include "ggml.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL
#include <tensorbox/gguf.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ggml's C ABI, the part used here (ggml.h of llama.cpp) */
typedef size_t (*g_quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start,
                                      int64_t nrows, int64_t n_per_row, const float *imatrix);
static g_quantize_chunk_fn g_quantize_chunk;
static bool (*g_requires_imatrix)(int type);
static size_t (*g_row_size)(int type, int64_t ne);

static uint64_t rng_s = 0x6A09E667F3BCC909ull;
static uint64_t rnd64(void) {
    rng_s ^= rng_s >> 12;
    rng_s ^= rng_s << 25;
    rng_s ^= rng_s >> 27;
    return rng_s * 0x2545F4914F6CDD1Dull;
}
static double rndu(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) {
    double u = rndu(), v = rndu();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Row kinds. Each fills n values. */
enum {
    R_GAUSS, R_GAUSS_SMALL, R_HEAVY, R_ZERO, R_NEGZERO, R_MIXZERO, R_CONST, R_NEGCONST, R_HUGE,
    R_TINY, R_SUBNORMAL, R_OUTLIER, R_RAMP, R_ALTERNATE, R_SPARSE, R_POSITIVE, R_HALFZERO,
    R_F16EDGE, NKINDS
};
static const char *const KIND_NAMES[NKINDS] = {
    "gauss", "gauss*1e-3", "heavy-tailed", "zeros", "-0", "+0/-0", "constant", "-constant",
    "huge", "tiny", "subnormal", "outlier", "ramp", "alternating", "sparse", "positive",
    "half zero", "f16-edge",
};

static void fill_row(int kind, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = 0;
        switch (kind) {
        case R_GAUSS: v = (float)gauss(); break;
        case R_GAUSS_SMALL: v = (float)(1e-3 * gauss()); break;
        case R_HEAVY: { const double g = gauss(); v = (float)(g * g * g); break; }
        case R_ZERO: v = 0.0f; break;
        case R_NEGZERO: v = -0.0f; break;
        case R_MIXZERO: v = (rnd64() & 1) ? -0.0f : 0.0f; break;
        case R_CONST: v = 0.75f; break;
        case R_NEGCONST: v = -3.25f; break;
        case R_HUGE: v = (float)(1e30 * gauss()); break;
        case R_TINY: v = (float)(1e-30 * gauss()); break;
        case R_SUBNORMAL: v = (float)(1e-40 * gauss()); break;
        case R_OUTLIER: v = (float)(0.01 * gauss()); break;
        case R_RAMP: v = (float)(-1.0 + 2.0 * (double)i / (double)n); break;
        case R_ALTERNATE: v = (i & 1) ? -1.5f : 1.5f; break;
        case R_SPARSE: v = (rnd64() % 16 == 0) ? (float)gauss() : 0.0f; break;
        case R_POSITIVE: v = (float)fabs(gauss()); break;
        case R_HALFZERO: v = i < n / 2 ? 0.0f : (float)gauss(); break;
        case R_F16EDGE: v = (float)(60000.0 * gauss()); break;
        }
        x[i] = v;
    }
    if (kind == R_OUTLIER && n > 0) x[rnd64() % (uint64_t)n] = 100.0f;
}

/* Importance matrices. */
enum { W_NONE, W_RANDOM, W_ZEROS, W_UNIFORM, NW };
static const char *const W_NAMES[NW] = {"none", "random", "random+zeros", "uniform"};

static void fill_w(int kind, float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double e = -log(rndu() + 1e-12); /* exponential: like squared activations */
        switch (kind) {
        case W_RANDOM: w[i] = (float)(1e-3 + e * e); break;
        case W_ZEROS: w[i] = (rnd64() % 5 == 0 || (i >= 32 && i < 64)) ? 0.0f : (float)e; break;
        default: w[i] = 1.0f; break;
        }
    }
}

typedef struct type_stats {
    unsigned calls, differ, differ_w[NW], aborts;
} type_stats;

/* ggml_quantize_chunk in a child process (its abort ends the child only): 1 with the bytes in
 * b, 0 when ggml did not return them. */
static int ggml_in_child(int gid, const float *x, uint8_t *b, int64_t nrows, int64_t n,
                         const float *qw, size_t nbytes) {
    uint8_t *sh = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 0;
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        setenv("GGML_NO_BACKTRACE", "1", 1);
        const int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        _exit(g_quantize_chunk(gid, x, sh, 0, nrows, n, qw) == nbytes ? 0 : 1);
    }
    int status = 0;
    const int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0;
    if (ok) memcpy(b, sh, nbytes);
    munmap(sh, nbytes);
    return ok;
}

/* One comparison: nrows rows of n values (kinds: row r has kind (k0 + r) % NKINDS, or all
 * R_GAUSS when k0 < 0). Returns 1 when the bytes are identical. */
static int compare(tbx_dtype dt, int gid, tbx_quant_rows_fn q, int64_t nrows, int64_t n, int k0,
                   int wkind, type_stats *st) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    const size_t rowb = (size_t)(n / di->block_size) * di->block_bytes;
    float *x = malloc((size_t)(nrows * n) * sizeof *x);
    float *w = malloc((size_t)n * sizeof *w);
    uint8_t *a = malloc(rowb * (size_t)nrows), *b = malloc(rowb * (size_t)nrows);
    if (!x || !w || !a || !b) {
        CHECK(!"out of memory");
        free(x), free(w), free(a), free(b);
        return 0;
    }
    for (int64_t r = 0; r < nrows; r++)
        fill_row(k0 < 0 ? R_GAUSS : (int)((k0 + r) % NKINDS), x + r * n, n);
    fill_w(wkind, w, n);
    const float *qw = wkind == W_NONE ? NULL : w;
    memset(a, 0xA5, rowb * (size_t)nrows);
    memset(b, 0x5A, rowb * (size_t)nrows);
    q(x, a, nrows, n, qw);
    bool huge = false; /* a row that can make ggml abort */
    for (int64_t r = 0; r < nrows; r++) huge |= k0 >= 0 && (k0 + r) % NKINDS == R_HUGE;
    if (huge && !ggml_in_child(gid, x, b, nrows, n, qw, rowb * (size_t)nrows)) {
        /* ggml aborted: row by row, counting the rows it aborts on */
        for (int64_t r = 0; r < nrows; r++) {
            const float *xr = x + r * n;
            uint8_t *ar = a + (size_t)r * rowb, *br = b + (size_t)r * rowb;
            if ((k0 + r) % NKINDS != R_HUGE) { /* in this process: an abort here fails */
                CHECK_EQ(g_quantize_chunk(gid, xr, br, 0, 1, n, qw), rowb);
                continue;
            }
            if (ggml_in_child(gid, xr, br, 1, n, qw, rowb)) continue;
            st->aborts++;
            q(xr, br, 1, n, qw); /* tensorbox's bytes, twice the same */
            CHECK(memcmp(ar, br, rowb) == 0);
        }
    } else if (!huge) {
        const size_t got = g_quantize_chunk(gid, x, b, 0, nrows, n, qw);
        CHECK_EQ(got, rowb * (size_t)nrows);
    }
    st->calls++;
    int same = memcmp(a, b, rowb * (size_t)nrows) == 0;
    CHECK(same);
    if (!same) {
        size_t off = 0;
        while (off < rowb * (size_t)nrows && a[off] == b[off]) off++;
        const size_t row = off / rowb, blk = (off % rowb) / di->block_bytes;
        st->differ_w[wkind]++;
        if (st->differ++ == 0)
            fprintf(stderr,
                    "  %s: first difference: %lld rows of %lld, row %zu (%s), block %zu, byte %zu "
                    "of the block (tbx %02x, ggml %02x), importance matrix %s\n",
                    di->name, (long long)nrows, (long long)n, row,
                    k0 < 0 ? "gauss" : KIND_NAMES[(k0 + (int)row) % NKINDS], blk,
                    off % di->block_bytes, a[off], b[off], W_NAMES[wkind]);
    }
    free(x), free(w), free(a), free(b);
    return same;
}

static void *peer;
static int load_peer(void) {
    const char *lib = getenv("TBX_GGML_LIB");
    if (!lib || !*lib) {
        fprintf(stderr, "test_ggml_rows_vs_ggml: TBX_GGML_LIB is not set: no ggml to compare with "
                        "(CMake sets it from .venv's llama_cpp/lib/libggml-base.so; run "
                        "scripts/bootstrap.sh --llama, then reconfigure)\n");
        return 0;
    }
    peer = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!peer) {
        fprintf(stderr, "test_ggml_rows_vs_ggml: cannot load %s: %s\n", lib, dlerror());
        return 0;
    }
    g_quantize_chunk = (g_quantize_chunk_fn)dlsym(peer, "ggml_quantize_chunk");
    g_requires_imatrix = (bool (*)(int))dlsym(peer, "ggml_quantize_requires_imatrix");
    g_row_size = (size_t(*)(int, int64_t))dlsym(peer, "ggml_row_size");
    if (!g_quantize_chunk || !g_requires_imatrix || !g_row_size) {
        fprintf(stderr, "test_ggml_rows_vs_ggml: %s lacks ggml_quantize_chunk, "
                        "ggml_quantize_requires_imatrix or ggml_row_size\n", lib);
        return 0;
    }
    return 1;
}

TBX_TEST(rows_equal_ggml_quantize_chunk) {
    CHECK(load_peer());
    if (!peer || !g_quantize_chunk) return;

    /* dtype -> ggml type id */
    int gid_of[TBX_DT_COUNT_];
    for (int d = 0; d < TBX_DT_COUNT_; d++) gid_of[d] = -1;
    for (uint32_t id = 0; id < 256; id++) {
        const tbx_dtype dt = tbx_gguf_type_dtype(id);
        if (dt > 0 && dt < TBX_DT_COUNT_ && gid_of[dt] < 0) gid_of[dt] = (int)id;
    }

    static const int64_t LENS[] = {256, 512, 768, 1024, 4096};
    unsigned ntypes = 0, total_differ = 0;
    for (int d = 1; d < TBX_DT_COUNT_; d++) {
        const tbx_dtype dt = (tbx_dtype)d;
        const tbx_quant_rows_fn q = tbx_ggml_quant_rows_for(dt);
        if (!q) continue;
        const tbx_dtype_info *di = tbx_dtype_get(dt);
        CHECK(di != NULL && di->block_size > 0);
        CHECK(gid_of[d] >= 0);
        if (!di || !di->block_size || gid_of[d] < 0) {
            fprintf(stderr, "  dtype %d has a row quantizer but no ggml type id\n", d);
            continue;
        }
        const int gid = gid_of[d];
        const int64_t bs = (int64_t)di->block_size;
        CHECK_EQ(g_row_size(gid, bs), di->block_bytes);
        CHECK_EQ(g_requires_imatrix(gid), tbx_ggml_quant_requires_imatrix(dt));
        ntypes++;

        /* row lengths: 1, 2, 3 blocks, then the fixed lengths that are whole blocks */
        int64_t lens[16];
        int nl = 0;
        for (int64_t k = 1; k <= 3; k++) lens[nl++] = k * bs;
        for (size_t i = 0; i < sizeof LENS / sizeof LENS[0]; i++)
            if (LENS[i] % bs == 0 && LENS[i] > 3 * bs) lens[nl++] = LENS[i];

        type_stats st = {0, 0, {0}, 0};
        for (int wk = 0; wk < NW; wk++) {
            if (wk == W_NONE && tbx_ggml_quant_requires_imatrix(dt)) continue;
            for (int l = 0; l < nl; l++) {
                const int64_t n = lens[l];
                /* every edge kind as its own one-row call, then all kinds in one call */
                for (int k = 0; k < NKINDS; k++) compare(dt, gid, q, 1, n, k, wk, &st);
                compare(dt, gid, q, NKINDS, n, 0, wk, &st);
                /* random rows: one, and several in one call */
                compare(dt, gid, q, 1, n, -1, wk, &st);
                compare(dt, gid, q, 5, n, -1, wk, &st);
            }
        }
        printf("  %-8s (ggml type %2d): %4u calls, %4u differ from ggml_quantize_chunk "
               "(importance matrix: none %u, random %u, with zeros %u, uniform %u)%s",
               di->name, gid, st.calls, st.differ, st.differ_w[W_NONE], st.differ_w[W_RANDOM],
               st.differ_w[W_ZEROS], st.differ_w[W_UNIFORM],
               tbx_ggml_quant_requires_imatrix(dt) ? " (none: not allowed)" : "");
        if (st.aborts) printf("; ggml aborts on %u huge rows (not compared)", st.aborts);
        printf("\n");
        total_differ += st.differ;
    }
    printf("  %u types with a row quantizer, %u differing calls\n", ntypes, total_differ);
    CHECK(ntypes > 0);
}

int main(void) {
    const int rc = tbx_test_main();
    if (peer) dlclose(peer);
    return rc;
}
