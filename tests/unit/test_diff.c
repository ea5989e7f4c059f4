/* test_diff.c - tbx_diff's arithmetic (src/api/diff.c): the sums and metrics of value pairs,
 * llama's q/k row order, and a whole report of two safetensors files built here in memory.
 * Every expected figure is worked out by hand from the values written below.
 * TBX_TEST_LABEL_THREADS (tbx_diff runs worker threads) */
#include "tbx_test.h"
#include "api.h"

#include <math.h>

static int near(double x, double y) { return fabs(x - y) <= 1e-15 * fmax(fabs(x), fabs(y)); }

TBX_TEST(sums_and_metrics) {
    const float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
    double s[9], m[4];
    tbx_diff_sums_(a, b, 4, s);
    CHECK(s[0] == 4 && s[1] == 3 && s[2] == 0 && s[3] == 0);
    CHECK(s[4] == 1 && s[5] == 30 && s[6] == 39 && s[7] == 34 && s[8] == 1);
    tbx_diff_metrics_(s, m);
    CHECK(m[0] == 1);
    CHECK(near(m[1], 0.5));                       /* sqrt(1 / 4) */
    CHECK(near(m[2], 1.0 / 30));                  /* 1 / (1 + 4 + 9 + 16) */
    CHECK(near(m[3], 34 / sqrt(30.0 * 39.0)));
}

TBX_TEST(sums_nonfinite_and_zero) {
    const float a[4] = {NAN, INFINITY, 1, -2}, b[4] = {NAN, -INFINITY, 1, -2};
    double s[9], m[4];
    tbx_diff_sums_(a, b, 4, s);
    /* NaN = NaN and the finite pairs are equal; inf against -inf is not */
    CHECK(s[0] == 4 && s[1] == 3 && s[2] == 2 && s[3] == 1);
    CHECK(s[4] == 0 && s[5] == 5 && s[6] == 5 && s[7] == 5 && s[8] == 0);
    const float z[2] = {0, 0}, o[2] = {0, 1};
    tbx_diff_sums_(z, z, 2, s);
    tbx_diff_metrics_(s, m);
    CHECK(m[2] == 0 && isnan(m[3]));              /* equal zeros: nmse 0, cosine undefined */
    tbx_diff_sums_(z, o, 2, s);
    tbx_diff_metrics_(s, m);
    CHECK(isnan(m[2]) && m[0] == 1);              /* a zero reference that differs */
}

TBX_TEST(simd_lanes_same_bits) {
    /* the AVX2 kernel (when the CPU has it) and the scalar lanes on random values of odd
     * lengths: the same sums, bit for bit */
    static float a[1031], b[1031];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 1031; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((int64_t)(x >> 11) % 200001) / 7919.0f;
        b[i] = (i % 5) ? a[i] + (float)((int64_t)(x >> 40) % 101) / 1e4f : a[i];
    }
    for (uint64_t n = 0; n <= 1031; n += 103) {
        double s0[9], s1[9];
        CHECK(tbx_diff_sums_finite_(a, b, n, s0, 0) && tbx_diff_sums_finite_(a, b, n, s1, 1));
        CHECK(memcmp(s0, s1, sizeof s0) == 0);
    }
    b[17] = NAN; /* not finite: the fast path declines */
    double s[9];
    CHECK(!tbx_diff_sums_finite_(a, b, 1031, s, 0) && !tbx_diff_sums_finite_(a, b, 1031, s, 1));
}

TBX_TEST(permute_rows_by_heads) {
    /* 8 rows of 2, heads of 4 rows: out row h*4 + 2j + i = in row h*4 + i*2 + j */
    float in[16], out[16];
    for (int r = 0; r < 8; r++) { in[2 * r] = (float)(10 * r); in[2 * r + 1] = (float)(10 * r + 1); }
    tbx_diff_permute_(in, out, 8, 2, 4);
    const int want[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int r = 0; r < 8; r++) {
        CHECK(out[2 * r] == (float)(10 * want[r]));
        CHECK(out[2 * r + 1] == (float)(10 * want[r] + 1));
    }
}

/* A safetensors file: the 8-byte header length, the header, the data. */
static size_t st_file(unsigned char *buf, size_t cap, const char *header, const void *data,
                      size_t n) {
    size_t h = strlen(header);
    if (8 + h + n > cap) return 0;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    memcpy(buf + 8 + h, data, n);
    return 8 + h + n;
}

static const tbx_value *get(const tbx_value *m, const char *key) {
    for (uint64_t i = 0; i < tbx_value_len(m); i++) {
        size_t n = 0;
        const char *k = tbx_value_key_at(m, i, &n);
        if (k && n == strlen(key) && !memcmp(k, key, n)) return tbx_value_at(m, i);
    }
    return NULL;
}
static double getf(const tbx_value *m, const char *key) {
    double d = NAN;
    tbx_value_get_f64(get(m, key), &d);
    return d;
}
static const char *gets(const tbx_value *m, const char *key) {
    const char *s = tbx_value_get_str(get(m, key), NULL);
    return s ? s : "";
}

TBX_TEST(report_of_two_files) {
    /* A: w = [[1, 2], [3, 4]], only_a; B: w = [[1, 2], [3, 5]], only_b; "k" 1 -> 2, "same" */
    const float wa[6] = {1, 2, 3, 4, 7, 7}, wb[6] = {1, 2, 3, 5, 8, 8};
    unsigned char fa[1024], fb[1024];
    size_t na = st_file(fa, sizeof fa,
                        "{\"__metadata__\":{\"k\":\"1\",\"same\":\"x\"},"
                        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                        "\"only_a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}  ",
                        wa, sizeof wa);
    size_t nb = st_file(fb, sizeof fb,
                        "{\"__metadata__\":{\"k\":\"2\",\"same\":\"x\"},"
                        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                        "\"only_b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}  ",
                        wb, sizeof wb);
    CHECK(na && nb);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    tbx_file *a = NULL, *b = NULL;
    tbx_error err;
    CHECK_OK(tbx_open_memory(&a, fa, na, &oo, &err));
    CHECK_OK(tbx_open_memory(&b, fb, nb, &oo, &err));
    if (!a || !b) { tbx_close(a); tbx_close(b); return; }
    for (uint32_t threads = 1; threads <= 4; threads += 3) {
        tbx_diff_options o;
        tbx_diff_options_init(&o);
        o.threads = threads;
        tbx_value *doc = NULL;
        CHECK_OK(tbx_diff(a, b, &o, &doc, &err));
        if (!doc) continue;
        const tbx_value *t = get(doc, "tensors"), *md = get(doc, "metadata");
        const tbx_value *cmp = get(t, "compared");
        CHECK_EQ(tbx_value_len(cmp), 1);
        const tbx_value *w = tbx_value_at(cmp, 0);
        CHECK_STR(gets(w, "name"), "w");
        CHECK(near(getf(w, "nmse"), 1.0 / 30) && getf(w, "max_abs") == 1);
        CHECK(near(getf(w, "rmse"), 0.5) && near(getf(w, "cosine"), 34 / sqrt(30.0 * 39.0)));
        CHECK_STR(gets(tbx_value_at(get(t, "added"), 0), "name"), "only_b");
        CHECK_STR(gets(tbx_value_at(get(t, "removed"), 0), "name"), "only_a");
        CHECK_EQ(tbx_value_len(get(md, "changed")), 1);
        CHECK_STR(gets(tbx_value_at(get(md, "changed"), 0), "key"), "k");
        uint64_t differs = 0;
        CHECK_OK(tbx_value_get_u64(get(doc, "differs"), &differs));
        CHECK(differs == 1);
        tbx_value_free(doc);
    }
    /* a file against itself: identical */
    tbx_value *doc = NULL;
    CHECK_OK(tbx_diff(a, a, NULL, &doc, &err));
    uint64_t same = 0;
    CHECK_OK(tbx_value_get_u64(get(doc, "identical"), &same));
    CHECK(same == 1);
    tbx_value_free(doc);
    /* bad options */
    tbx_diff_options o;
    tbx_diff_options_init(&o);
    o.map = 7;
    CHECK_EQ(tbx_diff(a, b, &o, &doc, &err), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_diff(NULL, b, NULL, &doc, &err), TBX_E_INVALID_ARG);
    tbx_close(a);
    tbx_close(b);
}

TBX_TEST_MAIN()
