/*
 * test_ggml_quant.c - the ggml block kernels (src/quant/ggml*.c).
 *
 *  - scalar dequantizers against gguf-py (vectors written by tests/python/make_ggml_vectors.py:
 *    tests/data/ggml, or the directory in TBX_GGML_VECTORS), bit for bit;
 *  - hand-computed blocks of the types gguf-py lacks (q1_0, q2_0, q8_1, q8_K) and of nvfp4;
 *  - AVX2 / AVX-512 dequantizers against the scalar ones on random and edge blocks, bit for bit
 *    (a kernel the CPU cannot run is reported and skipped, its presence still checked);
 *  - quantizers: gguf-py's bytes for q8_0/q4_0/q4_1/q5_0/q5_1/tq1_0/tq2_0/mxfp4, identical bytes
 *    on every CPU path, round-trip error bounds, and the K-quant encoder's RMSE against ggml's
 *    reference algorithm on several distributions (never worse);
 *  - the AVX2 kernels of ggml's reference K-quant algorithm against the scalar reference, byte
 *    for byte, on edge-case and random super-blocks (NaN/Inf ones through the fallback only).
 */
#include "tbx_test.h"

#include "ggml.h"
#include "check.h"
#include "tensorbox.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */
static uint64_t rng_s = 0x9E3779B97F4A7C15ull;
static void rng_seed(uint64_t s) { rng_s = s ? s : 1; }
static uint64_t rnd64(void) {
    rng_s ^= rng_s >> 12;
    rng_s ^= rng_s << 25;
    rng_s ^= rng_s >> 27;
    return rng_s * 0x2545F4914F6CDD1Dull;
}
static uint32_t rnd32(void) { return (uint32_t)(rnd64() >> 32); }
static double rndu(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) {
    double u = rndu(), v = rndu();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static const tbx_dtype_info *info(tbx_dtype dt) {
    const tbx_dtype_info *i = tbx_dtype_get(dt);
    if (!i) {
        fprintf(stderr, "no dtype info for %d\n", (int)dt);
        abort();
    }
    return i;
}

/* Number of elements whose bits differ (prints the first few). */
static long diff_bits(const char *what, const float *got, const float *want, size_t n) {
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (fbits(got[i]) != fbits(want[i])) {
            if (bad < 5)
                fprintf(stderr, "%s: element %zu: got %08x (%g) want %08x (%g)\n", what, i,
                        fbits(got[i]), (double)got[i], fbits(want[i]), (double)want[i]);
            bad++;
        }
    }
    return bad;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

static const char *vectors_dir(char *buf, size_t cap) {
    const char *v = getenv("TBX_GGML_VECTORS");
    if (v && *v) return v;
    const char *src = getenv("TBX_SOURCE_DIR");
    snprintf(buf, cap, "%s/tests/data/ggml", src && *src ? src : ".");
    return buf;
}

typedef struct vecfile {
    char name[17];
    uint32_t kind, ggml_id, block_size, block_bytes, nblocks;
    uint8_t *blocks; /* nblocks * block_bytes */
    float *f32;      /* nblocks * block_size */
} vecfile;

static void vec_free(vecfile *v) {
    free(v->blocks);
    free(v->f32);
    memset(v, 0, sizeof *v);
}

/* Loads <dir>/<prefix><name>.bin; returns 0 on success. */
static int vec_load(const char *prefix, const char *name, vecfile *v) {
    char dirbuf[1024], path[1200];
    snprintf(path, sizeof path, "%s/%s%s.bin", vectors_dir(dirbuf, sizeof dirbuf), prefix, name);
    memset(v, 0, sizeof *v);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set TBX_GGML_VECTORS or TBX_SOURCE_DIR)\n", path);
        return -1;
    }
    uint8_t h[48];
    int rc = -1;
    if (fread(h, 1, 48, f) != 48 || memcmp(h, "TBXGGV01", 8) != 0) {
        fprintf(stderr, "%s: bad header\n", path);
        goto out;
    }
    memcpy(v->name, h + 8, 16);
    v->name[16] = 0;
    uint32_t w[6];
    for (int k = 0; k < 6; k++)
        w[k] = (uint32_t)h[24 + 4 * k] | (uint32_t)h[25 + 4 * k] << 8 |
               (uint32_t)h[26 + 4 * k] << 16 | (uint32_t)h[27 + 4 * k] << 24;
    v->kind = w[0];
    v->ggml_id = w[1];
    v->block_size = w[2];
    v->block_bytes = w[3];
    v->nblocks = w[4];
    if (v->nblocks == 0 || v->nblocks > 1000000 || v->block_size > 256 || v->block_bytes > 300) {
        fprintf(stderr, "%s: implausible header\n", path);
        goto out;
    }
    const size_t nb = (size_t)v->nblocks * v->block_bytes, nf = (size_t)v->nblocks * v->block_size;
    v->blocks = xmalloc(nb);
    v->f32 = xmalloc(nf * 4);
    uint8_t *raw = xmalloc(nf * 4);
    int ok;
    if (v->kind == 0)
        ok = fread(v->blocks, 1, nb, f) == nb && fread(raw, 1, nf * 4, f) == nf * 4;
    else
        ok = fread(raw, 1, nf * 4, f) == nf * 4 && fread(v->blocks, 1, nb, f) == nb;
    for (size_t i = 0; ok && i < nf; i++) {
        const uint32_t u = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                           (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        memcpy(&v->f32[i], &u, 4);
    }
    free(raw);
    if (!ok) {
        fprintf(stderr, "%s: truncated\n", path);
        goto out;
    }
    rc = 0;
out:
    fclose(f);
    if (rc) vec_free(v);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* 1. Dequantizers against gguf-py                                                             */
/* ------------------------------------------------------------------------------------------ */
static const char *const kGgufPyDequant[] = {
    "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
    "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs",
    "tq1_0", "tq2_0", "mxfp4", "nvfp4",
};

static int negates_product(tbx_dtype dt) {
    return dt == TBX_DT_IQ2_XXS || dt == TBX_DT_IQ2_XS || dt == TBX_DT_IQ2_S || dt == TBX_DT_IQ3_XXS ||
           dt == TBX_DT_IQ3_S;
}

static void check_dequant_file(const char *name) {
    vecfile v;
    CHECK_OK(vec_load("dq_", name, &v));
    if (!v.blocks) return;
    const tbx_dtype dt = tbx_dtype_from_name(name);
    CHECK(dt != TBX_DT_INVALID);
    CHECK_EQ(v.kind, 0);
    CHECK_EQ(info(dt)->block_size, v.block_size);
    CHECK_EQ(info(dt)->block_bytes, v.block_bytes);
    const size_t nf = (size_t)v.nblocks * v.block_size;
    float *y = xmalloc(nf * 4);
    char what[64];
    tbx_dequant_fn fns[4] = {tbx_ggml_dequant_scalar_for(dt), NULL, NULL, tbx_ggml_dequant_for(dt)};
    const unsigned isa = tbx_ggml_cpu_isa();
    if (isa & TBX_GGML_ISA_AVX2) fns[1] = tbx_ggml_dequant_avx2_for(dt);
    if (isa & TBX_GGML_ISA_AVX512) fns[2] = tbx_ggml_dequant_avx512_for(dt);
    static const char *const path[4] = {"scalar", "avx2", "avx512", "dispatch"};
    CHECK(fns[0] != NULL);
    for (int p = 0; p < 4; p++) {
        if (!fns[p]) continue;
        memset(y, 0xA5, nf * 4);
        fns[p](v.blocks, y, v.nblocks);
        snprintf(what, sizeof what, "%s %s vs gguf-py", name, path[p]);
        /* gguf-py multiplies a codebook value by -1.0, which keeps a NaN's sign; ggml (and
         * tensorbox) negate the product, which flips it. Exactly that is allowed here:
         * tests/python/test_ggml_dequant_identical.py holds these types to ggml's bits. */
        if (negates_product(dt)) {
            for (size_t k = 0; k < nf; k++)
                if (y[k] != y[k] && v.f32[k] != v.f32[k] && (fbits(y[k]) ^ fbits(v.f32[k])) == 0x80000000u)
                    y[k] = v.f32[k];
        }
        const long bad = diff_bits(what, y, v.f32, nf);
        if (bad) fprintf(stderr, "%s: %ld of %zu elements differ\n", what, bad, nf);
        CHECK_EQ(bad, 0);
    }
    free(y);
    vec_free(&v);
}

TBX_TEST(dequant_matches_gguf_py) {
    for (size_t i = 0; i < sizeof kGgufPyDequant / sizeof *kGgufPyDequant; i++)
        check_dequant_file(kGgufPyDequant[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* 2. Quantizers against gguf-py                                                               */
/* ------------------------------------------------------------------------------------------ */
static const char *const kGgufPyQuant[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                           "tq1_0", "tq2_0", "mxfp4"};

TBX_TEST(quant_matches_gguf_py) {
    for (size_t t = 0; t < sizeof kGgufPyQuant / sizeof *kGgufPyQuant; t++) {
        const char *name = kGgufPyQuant[t];
        vecfile v;
        CHECK_OK(vec_load("q_", name, &v));
        if (!v.blocks) continue;
        const tbx_dtype dt = tbx_dtype_from_name(name);
        CHECK_EQ(v.kind, 1);
        CHECK_EQ(info(dt)->block_bytes, v.block_bytes);
        const size_t nb = (size_t)v.nblocks * v.block_bytes;
        uint8_t *q = xmalloc(nb);
        tbx_quant_fn fns[2] = {tbx_ggml_quant_scalar_for(dt), tbx_ggml_quant_for(dt)};
        CHECK(fns[0] != NULL && fns[1] != NULL);
        for (int p = 0; p < 2; p++) {
            if (!fns[p]) continue;
            memset(q, 0xA5, nb);
            fns[p](v.f32, q, v.nblocks);
            long bad = 0;
            for (uint32_t b = 0; b < v.nblocks; b++) {
                if (memcmp(q + (size_t)b * v.block_bytes, v.blocks + (size_t)b * v.block_bytes,
                           v.block_bytes) != 0) {
                    if (bad < 3) {
                        fprintf(stderr, "%s quant (path %d): block %u differs:\n got ", name, p, b);
                        for (uint32_t k = 0; k < v.block_bytes && k < 40; k++)
                            fprintf(stderr, "%02x", q[(size_t)b * v.block_bytes + k]);
                        fprintf(stderr, "\nwant ");
                        for (uint32_t k = 0; k < v.block_bytes && k < 40; k++)
                            fprintf(stderr, "%02x", v.blocks[(size_t)b * v.block_bytes + k]);
                        fprintf(stderr, "\n");
                    }
                    bad++;
                }
            }
            CHECK_EQ(bad, 0);
        }
        free(q);
        vec_free(&v);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* 3. Types gguf-py cannot decode: hand-computed blocks                                         */
/* ------------------------------------------------------------------------------------------ */
static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

TBX_TEST(dequant_q1_0_by_hand) {
    uint8_t b[2 * 18];
    float y[256];
    put16(b, 0x3E00);  /* 1.5 */
    put16(b + 18, 0xFC00); /* -Inf */
    for (int k = 0; k < 16; k++) {
        b[2 + k] = (uint8_t)(0x5A + 7 * k);
        b[20 + k] = (uint8_t)(0xFF - k);
    }
    tbx_dequant_fn f = tbx_ggml_dequant_scalar_for(TBX_DT_Q1_0);
    CHECK(f != NULL);
    if (!f) return;
    f(b, y, 2);
    int bad = 0;
    for (int j = 0; j < 128; j++) {
        const int bit = (b[2 + j / 8] >> (j % 8)) & 1; /* bit set: +d, clear: -d */
        if (y[j] != (bit ? 1.5f : -1.5f)) bad++;
        const int bit2 = (b[20 + j / 8] >> (j % 8)) & 1;
        if (y[128 + j] != (bit2 ? -INFINITY : INFINITY)) bad++;
    }
    CHECK_EQ(bad, 0);
    /* NaN scale: the scale itself, negated for clear bits (no arithmetic involved) */
    put16(b, 0x7E01);
    b[2] = 0x01;
    f(b, y, 1);
    CHECK(isnan(y[0]) && !signbit(y[0]));
    CHECK(isnan(y[1]) && signbit(y[1]));
}

TBX_TEST(dequant_q2_0_by_hand) {
    uint8_t b[18];
    float y[64];
    put16(b, 0xC100); /* -2.5 */
    /* element j: bits 2*(j%4) of byte j/4; codes 0,1,2,3 -> -1,0,+1,+2 times d */
    for (int k = 0; k < 16; k++) b[2 + k] = (uint8_t)(0xE4 ^ (k * 0x1B));
    tbx_dequant_fn f = tbx_ggml_dequant_scalar_for(TBX_DT_Q2_0);
    CHECK(f != NULL);
    if (!f) return;
    f(b, y, 1);
    static const float lv[4] = {2.5f, -0.0f, -2.5f, -5.0f}; /* (q-1) * -2.5 */
    int bad = 0;
    for (int j = 0; j < 64; j++) {
        const int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
        if (fbits(y[j]) != fbits(lv[q])) bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(fbits(y[1]), fbits(-0.0f)); /* byte 0xE4: codes 0,1,2,3 */
    CHECK(y[0] == 2.5f && y[2] == -2.5f && y[3] == -5.0f);
}

TBX_TEST(dequant_q8_1_and_q8_K_by_hand) {
    uint8_t b1[36];
    float y[256];
    put16(b1, 0x2E66);   /* 0.0999755859375 */
    put16(b1 + 2, 0x7C00); /* s is ignored by the dequantizer */
    for (int j = 0; j < 32; j++) b1[4 + j] = (uint8_t)(int8_t)(j * 8 - 128);
    tbx_dequant_fn f = tbx_ggml_dequant_scalar_for(TBX_DT_Q8_1);
    CHECK(f != NULL);
    if (!f) return;
    f(b1, y, 1);
    int bad = 0;
    for (int j = 0; j < 32; j++)
        if (y[j] != (float)(j * 8 - 128) * 0.0999755859375f) bad++;
    CHECK_EQ(bad, 0);

    uint8_t bk[292];
    memset(bk, 0, sizeof bk);
    const float d = -3.0517578125e-05f; /* stored as little-endian f32 */
    const uint32_t du = fbits(d);
    for (int k = 0; k < 4; k++) bk[k] = (uint8_t)(du >> (8 * k));
    for (int j = 0; j < 256; j++) bk[4 + j] = (uint8_t)(int8_t)(127 - j);
    f = tbx_ggml_dequant_scalar_for(TBX_DT_Q8_K);
    CHECK(f != NULL);
    if (!f) return;
    f(bk, y, 1);
    bad = 0;
    for (int j = 0; j < 256; j++)
        if (y[j] != d * (float)(int8_t)(127 - j)) bad++;
    CHECK_EQ(bad, 0);
}

TBX_TEST(dequant_nvfp4_by_hand) {
    /* 4 UE4M3 scales (bias 7, decoded value halved to match the doubled E2M1 levels), 32 bytes
     * of nibbles: sub-block s covers elements 16s..16s+15, low nibbles first. */
    uint8_t b[36];
    float y[64];
    b[0] = 0x38; /* exp 7, man 0: 1.0 -> 0.5 */
    b[1] = 0x7F; /* the NaN code: 0 */
    b[2] = 0x05; /* subnormal: 5 * 2^-9 -> 5 * 2^-10 */
    b[3] = 0x77; /* exp 14, man 7: 1.875 * 128 = 240 -> 120 */
    for (int k = 0; k < 32; k++) b[4 + k] = (uint8_t)(k * 37 + 11);
    tbx_dequant_fn f = tbx_ggml_dequant_scalar_for(TBX_DT_NVFP4);
    CHECK(f != NULL);
    if (!f) return;
    f(b, y, 1);
    static const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const float ds[4] = {0.5f, 0.0f, 5.0f / 1024.0f, 120.0f};
    int bad = 0;
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 8; j++) {
            const uint8_t q = b[4 + 8 * s + j];
            if (y[16 * s + j] != (float)kv[q & 15] * ds[s]) bad++;
            if (y[16 * s + 8 + j] != (float)kv[q >> 4] * ds[s]) bad++;
        }
    CHECK_EQ(bad, 0);
}

TBX_TEST(every_ggml_block_type_has_a_scalar_dequantizer) {
    static const tbx_dtype all[] = {
        TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q5_0, TBX_DT_Q5_1, TBX_DT_Q8_0, TBX_DT_Q8_1,
        TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K, TBX_DT_Q8_K,
        TBX_DT_IQ2_XXS, TBX_DT_IQ2_XS, TBX_DT_IQ3_XXS, TBX_DT_IQ1_S, TBX_DT_IQ4_NL,
        TBX_DT_IQ3_S, TBX_DT_IQ2_S, TBX_DT_IQ4_XS, TBX_DT_IQ1_M, TBX_DT_TQ1_0, TBX_DT_TQ2_0,
        TBX_DT_MXFP4, TBX_DT_NVFP4, TBX_DT_Q1_0, TBX_DT_Q2_0,
    };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        tbx_dequant_fn f = tbx_ggml_dequant_scalar_for(all[i]);
        CHECK(f != NULL);
        CHECK(tbx_ggml_dequant_for(all[i]) != NULL);
        if (!f) continue;
        /* zero blocks: nothing written */
        float y[4] = {1, 2, 3, 4};
        f(NULL, y, 0);
        CHECK(y[0] == 1 && y[3] == 4);
    }
    CHECK(tbx_ggml_dequant_scalar_for(TBX_DT_F32) == NULL);
    CHECK(tbx_ggml_dequant_for((tbx_dtype)93) == NULL);
    /* a build with x86 SIMD kernels (the AVX2 encoder kernels exist) has them for the required
     * dequantizers too */
    static const tbx_dtype simd[] = {TBX_DT_Q8_0, TBX_DT_Q4_0, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K};
    const int have_simd = tbx_kq_ops_avx2() != NULL;
#if defined(__x86_64__) && !defined(TBX_GGML_NO_SIMD)
    CHECK(have_simd);
#endif
    for (size_t i = 0; i < sizeof simd / sizeof *simd; i++) {
        CHECK((tbx_ggml_dequant_avx2_for(simd[i]) != NULL) == have_simd);
        CHECK((tbx_ggml_dequant_avx512_for(simd[i]) != NULL) == have_simd);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* 4. SIMD dequantizers against the scalar ones                                                 */
/* ------------------------------------------------------------------------------------------ */
static const uint16_t kSpecialHalves[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01,
                                          0x7DFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF,
                                          0x3C00, 0x3555};

/* Offsets of the f16 scale fields per type (for the edge cases). */
static int scale_offsets(tbx_dtype dt, int *off) {
    switch (dt) {
    case TBX_DT_Q8_0: case TBX_DT_Q4_0: case TBX_DT_Q5_0: case TBX_DT_IQ4_NL: case TBX_DT_IQ4_XS:
    case TBX_DT_Q2_0: case TBX_DT_IQ1_S: case TBX_DT_IQ2_XXS: case TBX_DT_IQ2_XS:
    case TBX_DT_IQ2_S: case TBX_DT_IQ3_XXS: case TBX_DT_IQ3_S: case TBX_DT_Q1_0:
        off[0] = 0; return 1;
    case TBX_DT_Q8_1: off[0] = 0; off[1] = 2; return 2;
    case TBX_DT_Q2_K: off[0] = 80; off[1] = 82; return 2;
    case TBX_DT_Q3_K: off[0] = 108; return 1;
    case TBX_DT_TQ2_0: off[0] = 64; return 1;
    case TBX_DT_TQ1_0: off[0] = 52; return 1;
    case TBX_DT_Q4_K: case TBX_DT_Q5_K: case TBX_DT_Q4_1: case TBX_DT_Q5_1:
        off[0] = 0; off[1] = 2; return 2;
    case TBX_DT_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

static void random_blocks(tbx_dtype dt, uint8_t *b, size_t nblocks) {
    const size_t bb = info(dt)->block_bytes;
    int off[4];
    const int noff = scale_offsets(dt, off);
    for (size_t i = 0; i < nblocks; i++) {
        uint8_t *p = b + i * bb;
        const int mode = (int)(rnd32() % 6);
        for (size_t k = 0; k < bb; k++) p[k] = (uint8_t)rnd32();
        if (mode == 3) memset(p, 0x00, bb);
        if (mode == 4) memset(p, 0xFF, bb);
        for (int k = 0; k < noff; k++) {
            uint16_t h;
            if (mode == 0 || mode == 3 || mode == 4)
                h = kSpecialHalves[rnd32() % (sizeof kSpecialHalves / sizeof *kSpecialHalves)];
            else if (mode == 1)
                h = (uint16_t)rnd32();
            else
                h = (uint16_t)((rnd32() & 0x8000) | ((1 + rnd32() % 20) << 10) | (rnd32() & 0x3FF));
            put16(p + off[k], h);
        }
        if (dt == TBX_DT_IQ1_M && mode != 3 && mode != 4) {
            /* the f16 super-scale: nibble k of it is the top nibble of scale word k (b + 48) */
            const uint16_t h = mode == 0 ? kSpecialHalves[rnd32() % (sizeof kSpecialHalves /
                                                                     sizeof *kSpecialHalves)]
                                         : (uint16_t)rnd32();
            for (int k = 0; k < 4; k++) p[48 + 2 * k + 1] = (uint8_t)((p[48 + 2 * k + 1] & 0x0F) |
                                                                      (((h >> (4 * k)) & 15) << 4));
        }
        if (mode == 0 && dt == TBX_DT_MXFP4) { /* E8M0: the subnormal and largest exponents */
            static const uint8_t e[] = {0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF};
            p[0] = e[rnd32() % sizeof e];
        }
        if (mode == 0 && dt == TBX_DT_NVFP4) { /* UE4M3: zeros (0x00, 0x7F), subnormals, bit 7 */
            static const uint8_t e[] = {0x00, 0x7F, 0xFF, 0x80, 0x01, 0x07, 0x08, 0x78, 0x87};
            for (int k = 0; k < 4; k++) p[k] = e[rnd32() % sizeof e];
        }
        if (dt == TBX_DT_Q8_K) { /* f32 scale */
            static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                          0x7FC00001u, 0xFF800123u, 0x00000001u, 0x007FFFFFu,
                                          0x7F7FFFFFu, 0x3F800000u, 0x38000000u};
            uint32_t u = mode == 0 ? sp[rnd32() % (sizeof sp / sizeof *sp)]
                       : mode == 1 ? rnd32() : (rnd32() & 0x807FFFFFu) | (0x30000000u + (rnd32() % 0x0F000000u));
            for (int k = 0; k < 4; k++) p[k] = (uint8_t)(u >> (8 * k));
        }
    }
}

TBX_TEST(simd_dequant_matches_scalar) {
    /* every ggml block type (every dtype with a scalar dequantizer), not a hand list */
    tbx_dtype types[64];
    size_t ntypes = 0;
    for (int k = 0; k < 256; k++)
        if (tbx_ggml_dequant_scalar_for((tbx_dtype)k) && ntypes < sizeof types / sizeof *types)
            types[ntypes++] = (tbx_dtype)k;
    CHECK(ntypes >= 27); /* the 27 of today at least */
    const unsigned isa = tbx_ggml_cpu_isa();
    int ran = 0;
    rng_seed(42);
    for (size_t t = 0; t < ntypes; t++) {
        const tbx_dtype dt = types[t];
        const size_t bb = info(dt)->block_bytes, bs = info(dt)->block_size;
        const size_t nblocks = 777;
        /* +1: misaligned source and destination */
        uint8_t *src = xmalloc(nblocks * bb + 1);
        float *ref = xmalloc(nblocks * bs * 4), *got = xmalloc(nblocks * bs * 4 + 4);
        random_blocks(dt, src + 1, nblocks);
        tbx_ggml_dequant_scalar_for(dt)(src + 1, ref, nblocks);
        /* the AVX2 kernel lives in ggml_simd_avx2.c or ggml_simd_avx2_dq.c, never both */
        tbx_dequant_fn avx2 = tbx_ggml_dequant_avx2_for(dt), avx2_dq = tbx_ggml_dequant_avx2_dq_for(dt);
        CHECK(!(avx2 && avx2_dq));
        const struct { unsigned bit; tbx_dequant_fn f; const char *name; } paths[2] = {
            {TBX_GGML_ISA_AVX2, avx2 ? avx2 : avx2_dq, "avx2"},
            {TBX_GGML_ISA_AVX512, tbx_ggml_dequant_avx512_for(dt), "avx512"},
        };
#if (defined(__x86_64__) || defined(__i386__)) && !defined(TBX_GGML_NO_SIMD)
        CHECK(paths[0].f != NULL); /* every ggml block type has an AVX2 kernel */
#endif
        for (int p = 0; p < 2; p++) {
            if (!paths[p].f) continue;
            if (!(isa & paths[p].bit)) {
                if (t == 0) printf("note: CPU lacks %s; those kernels are not run\n", paths[p].name);
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "%s %s vs scalar", info(dt)->name, paths[p].name);
            for (size_t n = 0; n <= 9; n++) { /* small counts, then all */
                memset(got, 0x5A, nblocks * bs * 4 + 4);
                paths[p].f(src + 1, got + 1, n);
                CHECK_EQ(diff_bits(what, got + 1, ref, n * bs), 0);
                CHECK_EQ(fbits(got[1 + n * bs]), 0x5A5A5A5Au); /* nothing written past the end */
            }
            memset(got, 0x5A, nblocks * bs * 4 + 4);
            paths[p].f(src + 1, got + 1, nblocks);
            CHECK_EQ(diff_bits(what, got + 1, ref, nblocks * bs), 0);
            ran++;
        }
        free(src);
        free(ref);
        free(got);
    }
    CHECK(ran >= 0); /* always a check, even on a CPU without AVX2 */
}

/* ------------------------------------------------------------------------------------------ */
/* 5. Quantizers: determinism across paths, round trips, K-quant RMSE                          */
/* ------------------------------------------------------------------------------------------ */
enum { DIST_GAUSS, DIST_UNIFORM, DIST_LAPLACE, DIST_OUTLIERS, DIST_SHIFTED, DIST_ROWSCALE, NDIST };
static const char *const kDistName[NDIST] = {"gauss", "uniform", "laplace", "outliers",
                                             "shifted", "rowscale"};

static void fill(float *x, size_t n, int dist) {
    double row = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (i % 256 == 0) row = pow(10.0, rndu() * 4 - 2);
        double v;
        switch (dist) {
        case DIST_GAUSS: v = gauss(); break;
        case DIST_UNIFORM: v = rndu() * 2 - 1; break;
        case DIST_LAPLACE: v = (rndu() < 0.5 ? -1 : 1) * -log(rndu() + 1e-300); break;
        case DIST_OUTLIERS: v = gauss() * (rnd32() % 64 == 0 ? 20.0 : 1.0); break;
        case DIST_SHIFTED: v = gauss() * 0.3 + 1.0; break;
        default: v = gauss() * row; break;
        }
        x[i] = (float)(v * 0.02);
    }
}

static double rmse_of(tbx_dtype dt, tbx_quant_fn q, const float *x, size_t nblocks, double *rms) {
    const size_t bs = info(dt)->block_size, bb = info(dt)->block_bytes, n = nblocks * bs;
    uint8_t *blk = xmalloc(nblocks * bb);
    float *y = xmalloc(n * 4);
    q(x, blk, nblocks);
    tbx_ggml_dequant_scalar_for(dt)(blk, y, nblocks);
    double e = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        s += (double)x[i] * x[i];
    }
    free(blk);
    free(y);
    if (rms) *rms = sqrt(s / (double)n);
    return sqrt(e / (double)n);
}

static const tbx_dtype kQuantTypes[] = {TBX_DT_Q8_0, TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q5_0,
                                        TBX_DT_Q5_1, TBX_DT_TQ1_0, TBX_DT_TQ2_0, TBX_DT_MXFP4,
                                        TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K,
                                        TBX_DT_Q6_K};

TBX_TEST(quant_roundtrip_error_bounds) {
    /* relative RMSE bounds on N(0,1) data (generous: they catch broken encoders) */
    static const double bound[] = {0.006, 0.12, 0.1, 0.06, 0.05, 0.9, 0.9, 0.2,
                                   0.40, 0.22, 0.10, 0.05, 0.025};
    rng_seed(7);
    const size_t nblocks = 256; /* 64k values for the K types */
    float *x = xmalloc(nblocks * 256 * 4);
    for (size_t t = 0; t < sizeof kQuantTypes / sizeof *kQuantTypes; t++) {
        const tbx_dtype dt = kQuantTypes[t];
        const size_t bs = info(dt)->block_size, nb = nblocks * 256 / bs;
        for (size_t i = 0; i < nb * bs; i++) x[i] = (float)gauss();
        tbx_quant_fn q = tbx_ggml_quant_for(dt);
        CHECK(q != NULL);
        if (!q) continue;
        double rms;
        const double e = rmse_of(dt, q, x, nb, &rms);
        if (!(e / rms <= bound[t]))
            fprintf(stderr, "%s: relative rmse %.4f > %.4f\n", info(dt)->name, e / rms, bound[t]);
        CHECK(e / rms <= bound[t]);
    }
    free(x);
}

/* Inputs for the determinism test: ordinary data plus edge blocks. */
static void edge_inputs(float *x, size_t nblocks_of_256) {
    for (size_t b = 0; b < nblocks_of_256; b++) {
        float *p = x + 256 * b;
        const int mode = (int)(b % 12);
        for (int i = 0; i < 256; i++) p[i] = (float)gauss();
        switch (mode) {
        case 0: memset(p, 0, 1024); break;                           /* zeros */
        case 1: for (int i = 0; i < 256; i++) p[i] = 3.25f; break;   /* constant > 0 */
        case 2: for (int i = 0; i < 256; i++) p[i] = -0.5f; break;   /* constant < 0 */
        case 3: memset(p, 0, 1024); p[17] = 1e-3f; break;            /* one value */
        case 4: for (int i = 0; i < 256; i++) p[i] *= 1e6f; break;   /* f16 overflow of d */
        case 5: for (int i = 0; i < 256; i++) p[i] *= 1e-9f; break;  /* f16 underflow of d */
        case 6: p[3] = NAN; break;
        case 7: p[100] = INFINITY; p[200] = -INFINITY; break;
        case 8: for (int i = 0; i < 256; i++) p[i] = fabsf(p[i]) + 10.0f; break; /* offset */
        case 9: for (int i = 0; i < 256; i++) p[i] = (float)(i % 16) - 7.5f; break; /* grid */
        case 10: for (int i = 0; i < 256; i++) p[i] = i < 128 ? 0.0f : p[i]; break;
        default: break;
        }
    }
}

TBX_TEST(quant_paths_write_identical_bytes) {
    rng_seed(99);
    const size_t n256 = 96;
    float *x = xmalloc(n256 * 256 * 4);
    edge_inputs(x, n256);
    const int have_avx2 = (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) != 0;
    for (size_t t = 0; t < sizeof kQuantTypes / sizeof *kQuantTypes; t++) {
        const tbx_dtype dt = kQuantTypes[t];
        const size_t bs = info(dt)->block_size, bb = info(dt)->block_bytes, nb = n256 * 256 / bs;
        uint8_t *a = xmalloc(nb * bb), *b = xmalloc(nb * bb), *c = xmalloc(nb * bb);
        tbx_quant_fn qs = tbx_ggml_quant_scalar_for(dt), qd = tbx_ggml_quant_for(dt);
        CHECK(qs != NULL && qd != NULL);
        if (!qs || !qd) continue;
        memset(a, 0x11, nb * bb);
        memset(b, 0x22, nb * bb);
        qs(x, a, nb);
        qd(x, b, nb);
        CHECK(memcmp(a, b, nb * bb) == 0);
        tbx_quant_fn qa = tbx_ggml_quant_avx2_for(dt);
        if (qa && have_avx2) {
            memset(c, 0x33, nb * bb);
            qa(x, c, nb);
            if (memcmp(a, c, nb * bb) != 0) {
                for (size_t k = 0; k < nb; k++)
                    if (memcmp(a + k * bb, c + k * bb, bb) != 0) {
                        fprintf(stderr, "%s: scalar and avx2 differ at block %zu\n", info(dt)->name, k);
                        break;
                    }
            }
            CHECK(memcmp(a, c, nb * bb) == 0);
        }
        /* finite input within the type's range decodes to finite output (tensorbox's K
         * encoder saturates its f16 scales instead of overflowing them); a K super-block
         * beyond the range (mode 4: values up to ~5e6) or with Inf/NaN gets ggml's reference
         * bytes (tbx_ggml_quant_ref_for, compared with ggml itself in
         * tests/python/test_quant_overflow.py) */
        float *y = xmalloc(nb * bs * 4);
        tbx_ggml_dequant_scalar_for(dt)(a, y, nb);
        long nonfinite = 0, unlike_ref = 0, beyond = 0;
        const float range = tbx_quant_range(dt);
        tbx_quant_fn qr = tbx_ggml_quant_ref_for(dt);
        for (size_t k = 0; k < nb; k++) {
            const int mode = (int)((k * bs) / 256 % 12);
            if (bs == 256) {
                int out = 0;
                for (size_t i = 0; i < 256; i++) out |= !(fabsf(x[k * 256 + i]) <= range);
                if (out) {
                    uint8_t r[256];
                    qr(x + k * 256, r, 1);
                    unlike_ref += memcmp(r, a + k * bb, bb) != 0;
                    beyond += mode == 4;
                    continue;
                }
            }
            if (mode == 6 || mode == 7) continue; /* NaN/Inf input */
            if (dt == TBX_DT_Q8_0 || dt == TBX_DT_Q4_0 || dt == TBX_DT_Q4_1 || dt == TBX_DT_Q5_0 ||
                dt == TBX_DT_Q5_1 || dt == TBX_DT_TQ1_0 || dt == TBX_DT_TQ2_0)
                continue; /* ggml-identical encoders keep ggml's overflow to Inf */
            for (size_t i = 0; i < bs; i++)
                if (!isfinite(y[k * bs + i])) nonfinite++;
        }
        CHECK_EQ(nonfinite, 0);
        CHECK_EQ(unlike_ref, 0);
        /* some 1e6-scaled blocks exceed q2_K's range (45 x 65504 = 2.9e6) */
        if (dt == TBX_DT_Q2_K) CHECK(beyond > 0);
        free(y);
        free(a);
        free(b);
        free(c);
    }
    free(x);
}

/* One 32-element block of a hard case for the legacy quantizers' SIMD paths. */
static void legacy_edge_block(float *p, int mode) {
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                     FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 0.5f, -0.5f, 1.0f};
    const int nsp = (int)(sizeof specials / sizeof *specials);
    for (int i = 0; i < 32; i++) p[i] = (float)gauss();
    switch (mode) {
    case 0: break;                                                       /* random */
    case 1: for (int i = 0; i < 32; i++) p[i] = 0.0f; break;             /* all +0 */
    case 2: for (int i = 0; i < 32; i++) p[i] = (rnd32() & 1) ? 0.0f : -0.0f; break; /* +-0 */
    case 3: p[rnd32() % 32] = NAN; break;                                /* one NaN */
    case 4: for (int i = 0; i < 32; i++) if (rnd32() % 3 == 0) p[i] = NAN; break;
    case 5: p[rnd32() % 32] = (rnd32() & 1) ? INFINITY : -INFINITY; break;
    case 6: for (int i = 0; i < 32; i++) p[i] = specials[rnd32() % (uint32_t)nsp]; break;
    case 7: for (int i = 0; i < 32; i++) p[i] *= 1e37f; break;           /* huge: d overflows f16 */
    case 8: for (int i = 0; i < 32; i++) p[i] *= 1e-42f; break;          /* subnormal: 1/d = Inf */
    case 9: for (int i = 0; i < 32; i++) p[i] *= 1e-39f; break;
    case 10: /* exact halves after scaling (amax 127 / 8 / 16 -> id = +-1): rounding ties */
        for (int i = 0; i < 32; i++) p[i] = (float)((int)(rnd32() % 255) - 127) * 0.5f;
        p[0] = (rnd32() & 1) ? 127.0f : -127.0f;
        break;
    case 11: /* several elements of largest magnitude, both signs (first one wins) */
        for (int i = 0; i < 32; i++) p[i] = (float)((int)(rnd32() % 9) - 4);
        break;
    case 12: for (int i = 0; i < 32; i++) p[i] = fabsf(p[i]) + 1.0f; p[5] = 0.0f; break; /* min 0 */
    case 13: for (int i = 0; i < 32; i++) p[i] = -fabsf(p[i]) - 1.0f; p[9] = -0.0f; break; /* max -0 */
    case 14: for (int i = 0; i < 32; i++) p[i] = 3.0f; break;            /* constant */
    case 15: for (int i = 0; i < 32; i++) p[i] = INFINITY; break;        /* all +Inf */
    case 16: for (int i = 0; i < 32; i++) p[i] = -INFINITY; break;
    default: for (int i = 0; i < 32; i++) p[i] = (float)(gauss() * 1e4); break;
    }
}

TBX_TEST(legacy_quant_avx2_matches_scalar_bytes) {
    static const tbx_dtype lt[] = {TBX_DT_Q8_0, TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q5_0, TBX_DT_Q5_1,
                                   TBX_DT_MXFP4};
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2)) {
        printf("no AVX2 on this CPU: skipped\n");
        return;
    }
    rng_seed(4242);
    const size_t nb = 18 * 200 + 7; /* every mode many times; odd count */
    float *buf = xmalloc((nb * 32 + 1) * 4);
    float *x = buf + 1; /* misaligned for 32-byte loads */
    for (size_t k = 0; k < nb; k++) legacy_edge_block(x + 32 * k, (int)(k % 18));
    for (size_t t = 0; t < sizeof lt / sizeof *lt; t++) {
        const tbx_dtype dt = lt[t];
        const size_t bb = info(dt)->block_bytes;
        tbx_quant_fn qs = tbx_ggml_quant_scalar_for(dt), qa = tbx_ggml_quant_avx2_for(dt);
        CHECK(qs != NULL && qa != NULL);
        CHECK(tbx_ggml_quant_for(dt) == qa);
        if (!qs || !qa) continue;
        uint8_t *a = xmalloc(nb * bb + 1), *c = xmalloc(nb * bb + 1);
        memset(a, 0x11, nb * bb + 1);
        memset(c, 0x33, nb * bb + 1);
        qs(x, a, nb);
        qa(x, c + 1, nb); /* misaligned output */
        size_t bad = 0;
        for (size_t k = 0; k < nb; k++)
            if (memcmp(a + k * bb, c + 1 + k * bb, bb) != 0) {
                if (bad++ == 0)
                    fprintf(stderr, "%s: scalar and avx2 differ at block %zu (mode %zu)\n",
                            info(dt)->name, k, k % 18);
            }
        CHECK_EQ(bad, 0);
        /* block counts 0..3 leave the bytes after them alone */
        for (uint64_t n = 0; n < 4; n++) {
            memset(c, 0x5A, 4 * bb);
            qa(x, c, n);
            CHECK(memcmp(c, a, (size_t)n * bb) == 0);
            CHECK(c[n * bb] == 0x5A);
        }
        free(a);
        free(c);
    }
    free(buf);
}

/* One super-block of 256 values for the AVX2 kernels of ggml's reference K-quant algorithm:
 * ordinary data at many scales, and the edge cases of every step (flat and zero sub-blocks,
 * signed zeros, ties of the largest |x|, rounding ties, f16 overflow/underflow of the scales,
 * subnormals, values beyond the type's range, NaN/Inf). */
#define KREF_NMODES 26
static void kref_edge_block(float *p, int mode) {
    const double scale = pow(10.0, rndu() * 8 - 4);
    for (int i = 0; i < 256; i++) p[i] = (float)(gauss() * scale);
    switch (mode) {
    case 0: break;                                                         /* random, any scale */
    case 1: memset(p, 0, 1024); break;                                     /* zeros */
    case 2: for (int i = 0; i < 256; i++) p[i] = (rnd32() & 1) ? 0.0f : -0.0f; break;
    case 3: for (int i = 0; i < 256; i++) p[i] = 3.25f; break;             /* constant > 0 */
    case 4: for (int i = 0; i < 256; i++) p[i] = -0.75f; break;            /* constant < 0 */
    case 5: memset(p, 0, 1024); p[rnd32() % 256] = (float)(gauss() * scale); break; /* one value */
    case 6: p[rnd32() % 256] = (float)(scale * 1000.0); break;             /* single outlier */
    case 7: for (int i = 0; i < 256; i++) p[i] = (float)(i - 128) * 0.01f; break; /* ramp */
    case 8: for (int i = 0; i < 256; i++) p[i] = (float)(255 - i) * 1e-3f; break; /* ramp >= 0 */
    case 9: for (int i = 0; i < 256; i++) p[i] *= 1e6f; break;             /* f16 overflow */
    case 10: for (int i = 0; i < 256; i++) p[i] = (float)(gauss() * 1e30); break; /* huge */
    case 11: for (int i = 0; i < 256; i++) p[i] = (float)(gauss() * 1e-9); break; /* f16 underflow */
    case 12: for (int i = 0; i < 256; i++) p[i] = (float)(gauss() * 1e-30); break;
    case 13: for (int i = 0; i < 256; i++) p[i] = (float)(gauss() * 1e-40); break; /* subnormal */
    case 14: for (int i = 0; i < 256; i++) p[i] = (float)((int)(rnd32() % 7) - 3) * 1e-45f; break;
    case 15: /* sub-blocks of 16 at scales 10^-6 .. 10^6, some zero, some constant */
        for (int j = 0; j < 16; j++) {
            const int kind = (int)(rnd32() % 4);
            const double s = pow(10.0, rndu() * 12 - 6);
            for (int i = 0; i < 16; i++)
                p[16 * j + i] = kind == 0 ? 0.0f : kind == 1 ? (float)s : (float)(gauss() * s);
        }
        break;
    case 16: /* integer grid: rounding ties for many candidates */
        for (int i = 0; i < 256; i++) p[i] = (float)((int)(rnd32() % 17) - 8) * 0.5f;
        break;
    case 17: /* several values of the largest magnitude, both signs */
        for (int i = 0; i < 256; i++) p[i] = (float)((int)(rnd32() % 9) - 4);
        break;
    case 18: for (int i = 0; i < 256; i++) p[i] = fabsf(p[i]) + (float)scale * 5.0f; break;
    case 19: for (int i = 0; i < 256; i++) p[i] = -fabsf(p[i]) - (float)scale; break;
    case 20: for (int i = 0; i < 256; i++) if (rnd32() % 4) p[i] = 0.0f; break; /* sparse */
    case 21: p[rnd32() % 256] = NAN; break;
    case 22: p[rnd32() % 256] = (rnd32() & 1) ? INFINITY : -INFINITY; break;
    case 23: for (int i = 0; i < 256; i++) p[i] = NAN; break;
    case 24: for (int i = 0; i < 256; i++) p[i] = (rnd32() & 1) ? FLT_MAX : -FLT_MAX; break;
    default: /* sub-blocks of 32 alternating tiny and large */
        for (int j = 0; j < 8; j++)
            for (int i = 0; i < 32; i++) p[32 * j + i] = (float)(gauss() * (j & 1 ? 1e4 : 1e-4));
        break;
    }
}

/* The fallback handed to the AVX2 kernels in the test: the scalar reference, counting the
 * super-blocks it is given. */
static tbx_quant_fn kref_fb_ref;
static uint64_t kref_fb_blocks;
static void kref_counting_fallback(const float *x, void *dst, uint64_t nb) {
    kref_fb_blocks += nb;
    kref_fb_ref(x, dst, nb);
}

TBX_TEST(kref_avx2_matches_scalar_reference) {
    static const tbx_dtype kt[] = {TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K};
    const int have_avx2 = (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) != 0;
    for (size_t t = 0; t < sizeof kt / sizeof *kt; t++)
        CHECK((tbx_ggml_quant_kref_avx2_for(kt[t]) != NULL) == (tbx_ggml_quant_avx2_for(kt[t]) != NULL));
    CHECK(tbx_ggml_quant_kref_avx2_for(TBX_DT_Q8_0) == NULL);
    if (!have_avx2 || !tbx_ggml_quant_kref_avx2_for(TBX_DT_Q4_K)) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    rng_seed(2121);
    const size_t nb = KREF_NMODES * 60 + 3;
    float *buf = xmalloc((nb * 256 + 1) * 4);
    float *x = buf + 1; /* misaligned for 32-byte loads */
    size_t nonfinite = 0;
    for (size_t k = 0; k < nb; k++) {
        kref_edge_block(x + 256 * k, (int)(k % KREF_NMODES));
        int bad = 0;
        for (int i = 0; i < 256; i++) bad |= !isfinite(x[256 * k + i]);
        nonfinite += (size_t)bad;
    }
    for (size_t t = 0; t < sizeof kt / sizeof *kt; t++) {
        const tbx_dtype dt = kt[t];
        const size_t bb = info(dt)->block_bytes;
        const tbx_quant_fn ref = tbx_ggml_quant_ref_for(dt), def = tbx_ggml_quant_default_for(dt);
        const tbx_quant_fb_fn kr = tbx_ggml_quant_kref_avx2_for(dt);
        CHECK(ref != NULL && def != NULL && kr != NULL);
        if (!ref || !def || !kr) continue;
        uint8_t *a = xmalloc(nb * bb + 1), *c = xmalloc(nb * bb + 1), *d = xmalloc(nb * bb);
        memset(a, 0x11, nb * bb + 1);
        memset(c, 0x33, nb * bb + 1);
        memset(d, 0x55, nb * bb);
        ref(x, a, nb);
        kref_fb_ref = ref;
        kref_fb_blocks = 0;
        kr(x, c + 1, nb, kref_counting_fallback); /* misaligned output */
        size_t bad = 0;
        for (size_t k = 0; k < nb; k++)
            if (memcmp(a + k * bb, c + 1 + k * bb, bb) != 0 && bad++ < 3)
                fprintf(stderr, "%s: reference and avx2 differ at super-block %zu (mode %zu)\n",
                        info(dt)->name, k, k % KREF_NMODES);
        CHECK_EQ(bad, 0);
        /* the SIMD kernel encodes every finite super-block itself */
        CHECK_EQ(kref_fb_blocks, nonfinite);
        /* a conversion's default quantizer is this kernel's bytes */
        def(x, d, nb);
        CHECK(memcmp(a, d, nb * bb) == 0);
        /* block counts 0..3 leave the bytes after them alone */
        for (uint64_t n = 0; n < 4; n++) {
            memset(c, 0x5A, 4 * bb);
            kr(x, c, n, ref);
            CHECK(memcmp(c, a, (size_t)n * bb) == 0);
            CHECK(c[n * bb] == 0x5A);
        }
        free(a);
        free(c);
        free(d);
    }
    free(buf);
}

/* Random data at random per-sub-block scales: the AVX2 reference kernels against the scalar
 * one on many super-blocks (the lanes of a super-block take different branches). */
TBX_TEST(kref_avx2_matches_scalar_reference_random) {
    static const tbx_dtype kt[] = {TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K};
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_ggml_quant_kref_avx2_for(TBX_DT_Q4_K)) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    rng_seed(777);
    const size_t nb = 3000;
    float *x = xmalloc(nb * 256 * 4);
    for (size_t k = 0; k < nb; k++) {
        const int dist = (int)(k % NDIST);
        fill(x + 256 * k, 256, dist);
        for (int j = 0; j < 16; j++) {
            const float s = (float)pow(10.0, rndu() * 4 - 2);
            for (int i = 0; i < 16; i++) x[256 * k + 16 * j + i] *= s;
        }
    }
    for (size_t t = 0; t < sizeof kt / sizeof *kt; t++) {
        const tbx_dtype dt = kt[t];
        const size_t bb = info(dt)->block_bytes;
        const tbx_quant_fn ref = tbx_ggml_quant_ref_for(dt);
        const tbx_quant_fb_fn kr = tbx_ggml_quant_kref_avx2_for(dt);
        uint8_t *a = xmalloc(nb * bb), *c = xmalloc(nb * bb);
        ref(x, a, nb);
        kr(x, c, nb, ref);
        size_t bad = 0;
        for (size_t k = 0; k < nb; k++)
            if (memcmp(a + k * bb, c + k * bb, bb) != 0 && bad++ < 3)
                fprintf(stderr, "%s: reference and avx2 differ at super-block %zu\n",
                        info(dt)->name, k);
        CHECK_EQ(bad, 0);
        free(a);
        free(c);
    }
    free(x);
}

/* tq1_0 and tq2_0 (256-value blocks): the AVX2 quantizers against the scalar ones on the edge
 * super-blocks above (NaN ones through the fallback). */
TBX_TEST(tq_quant_avx2_matches_scalar_bytes) {
    static const tbx_dtype tt[] = {TBX_DT_TQ1_0, TBX_DT_TQ2_0};
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_ggml_quant_legacy_avx2_for(TBX_DT_TQ1_0)) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    rng_seed(5150);
    const size_t nb = KREF_NMODES * 40 + 1;
    float *buf = xmalloc((nb * 256 + 1) * 4);
    float *x = buf + 1;
    for (size_t k = 0; k < nb; k++) {
        kref_edge_block(x + 256 * k, (int)(k % KREF_NMODES));
        if (k % 7 == 3) /* exact rounding ties of x * id: +-0.5 after scaling by 1/4 */
            for (int i = 0; i < 256; i++) x[256 * k + i] = (float)((int)(rnd32() % 17) - 8) * 0.5f;
    }
    for (size_t t = 0; t < sizeof tt / sizeof *tt; t++) {
        const tbx_dtype dt = tt[t];
        const size_t bb = info(dt)->block_bytes;
        tbx_quant_fn qs = tbx_ggml_quant_scalar_for(dt), qa = tbx_ggml_quant_avx2_for(dt);
        CHECK(qs != NULL && qa != NULL);
        CHECK(tbx_ggml_quant_for(dt) == qa);
        if (!qs || !qa) continue;
        uint8_t *a = xmalloc(nb * bb), *c = xmalloc(nb * bb + 1);
        memset(a, 0x11, nb * bb);
        memset(c, 0x33, nb * bb + 1);
        qs(x, a, nb);
        qa(x, c + 1, nb);
        size_t bad = 0;
        for (size_t k = 0; k < nb; k++)
            if (memcmp(a + k * bb, c + 1 + k * bb, bb) != 0 && bad++ < 3)
                fprintf(stderr, "%s: scalar and avx2 differ at block %zu (mode %zu)\n",
                        info(dt)->name, k, k % KREF_NMODES);
        CHECK_EQ(bad, 0);
        free(a);
        free(c);
    }
    free(buf);
}

/* q1_0 and q2_0 (ggml_lowbit.c's scalar quantizers) against their AVX2 kernels: the edge
 * super-blocks above cut into blocks (q1_0 runs groups of eight blocks: counts that are not a
 * multiple of eight leave a tail for the scalar kernel), misaligned, and the default quantizer
 * (what the row quantizers run) gives the same bytes. */
TBX_TEST(lowbit_quant_avx2_matches_scalar_bytes) {
    static const tbx_dtype lt[] = {TBX_DT_Q1_0, TBX_DT_Q2_0};
    static const tbx_quant_fn sc[] = {tbx_gq_q1_0_blocks, tbx_gq_q2_0_blocks};
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_ggml_quant_legacy_avx2_for(TBX_DT_Q1_0)) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    rng_seed(6061);
    const size_t n256 = KREF_NMODES * 12 + 5;
    float *buf = xmalloc((n256 * 256 + 1) * 4);
    float *x = buf + 1;
    for (size_t k = 0; k < n256; k++) kref_edge_block(x + 256 * k, (int)(k % KREF_NMODES));
    for (size_t t = 0; t < sizeof lt / sizeof *lt; t++) {
        const tbx_dtype dt = lt[t];
        const size_t bs = info(dt)->block_size, bb = info(dt)->block_bytes;
        const tbx_quant_fb_fn qa = tbx_ggml_quant_legacy_avx2_for(dt);
        const tbx_quant_fn def = tbx_ggml_quant_default_for(dt);
        CHECK(qa != NULL && def != NULL);
        if (!qa || !def) continue;
        for (size_t cut = 0; cut < 3; cut++) {
            const size_t nb = n256 * 256 / bs - cut * 3; /* odd tails for q1_0's groups */
            uint8_t *a = xmalloc(nb * bb), *c = xmalloc(nb * bb + 1), *d = xmalloc(nb * bb);
            memset(a, 0x11, nb * bb);
            memset(c, 0x33, nb * bb + 1);
            memset(d, 0x55, nb * bb);
            sc[t](x, a, nb);
            qa(x, c + 1, nb, sc[t]);
            def(x, d, nb);
            size_t bad = 0;
            for (size_t k = 0; k < nb; k++)
                if (memcmp(a + k * bb, c + 1 + k * bb, bb) != 0 && bad++ < 3)
                    fprintf(stderr, "%s: scalar and avx2 differ at block %zu of %zu\n",
                            info(dt)->name, k, nb);
            CHECK_EQ(bad, 0);
            CHECK(memcmp(a, d, nb * bb) == 0);
            free(a);
            free(c);
            free(d);
        }
    }
    free(buf);
}

/* iq4_nl / iq4_xs: the row quantizers on the AVX2 kernels against the scalar kernels, byte for
 * byte, on the edge super-blocks above, without and with importance matrices (random positive,
 * holding zeros, huge), row lengths whose iq4_nl block count is not a multiple of the kernels'
 * eight; and the index kernel alone on special values (levels, midpoints, NaN, Inf). */
TBX_TEST(iq4_avx2_kernels_match_scalar) {
    const tbx_iq4_ops *sc = tbx_iq4_ops_scalar(), *av = tbx_iq4_ops_avx2();
    CHECK(sc != NULL);
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !av) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    rng_seed(4444);
    const int64_t rowlen[] = {256, 32 * 11, 4096};
    const size_t n256 = KREF_NMODES * 6 + 1;
    float *x = xmalloc(n256 * 256 * 4), *qw = xmalloc(4096 * 4);
    for (size_t k = 0; k < n256; k++) kref_edge_block(x + 256 * k, (int)(k % KREF_NMODES));
    for (int mode = 0; mode < 4; mode++) {
        for (int i = 0; i < 4096; i++)
            qw[i] = mode == 1 ? (float)(0.05 + rndu() * 4) : mode == 2 ? (rnd32() % 3 ? 1.0f : 0.0f)
                                                                      : (float)(rndu() * 1e30);
        for (size_t r = 0; r < sizeof rowlen / sizeof *rowlen; r++) {
            const int64_t n = rowlen[r];
            for (int t = 0; t < 2; t++) {
                if (t == 1 && n % 256) continue;
                const int64_t nrows = (int64_t)(n256 * 256) / n;
                const size_t bytes = (size_t)(nrows * n) / (t ? 256 : 32) * (t ? 136 : 18);
                uint8_t *a = xmalloc(bytes), *c = xmalloc(bytes);
                memset(a, 0x11, bytes);
                memset(c, 0x33, bytes);
                const float *w = mode ? qw : NULL;
                if (t) {
                    tbx_gq_rows_iq4_xs_with(sc, x, a, nrows, n, w);
                    tbx_gq_rows_iq4_xs_with(av, x, c, nrows, n, w);
                } else {
                    tbx_gq_rows_iq4_nl_with(sc, x, a, nrows, n, w);
                    tbx_gq_rows_iq4_nl_with(av, x, c, nrows, n, w);
                }
                if (memcmp(a, c, bytes) != 0)
                    fprintf(stderr, "%s: scalar and avx2 kernels differ (row %lld, matrix mode %d)\n",
                            t ? "iq4_xs" : "iq4_nl", (long long)n, mode);
                CHECK(memcmp(a, c, bytes) == 0);
                free(a);
                free(c);
            }
        }
    }
    /* indices of special values: every level, the midpoints between neighbours and one ulp
     * either side, beyond both ends, +-0, NaN, +-Inf */
    static const float lv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    float v[256];
    int nv = 0;
    for (int k = 0; k < 16 && nv < 240; k++) {
        v[nv++] = lv[k];
        if (k < 15) {
            const float mid = (lv[k] + lv[k + 1]) / 2;
            v[nv++] = mid;
            v[nv++] = nextafterf(mid, -1e9f);
            v[nv++] = nextafterf(mid, 1e9f);
        }
    }
    const float sp[] = {-1e9f, 1e9f, 0.0f, -0.0f, NAN, INFINITY, -INFINITY, -127.5f, 113.5f};
    for (size_t k = 0; k < sizeof sp / sizeof *sp; k++) v[nv++] = sp[k];
    while (nv < 256) v[nv++] = (float)(gauss() * 80);
    const float one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint8_t La[256], Lc[256];
    sc->indices8(v, one, La);
    av->indices8(v, one, Lc);
    CHECK(memcmp(La, Lc, 256) == 0);
    free(x);
    free(qw);
}

/* The weighted q4_0, q5_0, q3_K, q6_K rows on the AVX2 symmetric-fit kernel against the scalar
 * fit (a NULL kernel), byte for byte: the edge super-blocks above, importance matrices random,
 * holding zeros, huge (weights overflow: the kernel hands the groups back), rows whose q4_0
 * block count leaves blocks outside the groups of eight. */
/* The weighted row quantizers of `dts` on the scalar fit and on the AVX2 kernel (run(t, simd,
 * ...): type t's rows function with the kernel or NULL) give the same bytes: the edge
 * super-blocks in rows of 256, 416 and 4096 values, under a random matrix, one holding zeros
 * and a huge one. */
typedef void (*wq_run_fn)(size_t t, bool simd, const float *x, void *dst, int64_t nrows,
                          int64_t n, const float *qw);
static void check_weighted_kernel(const char *what, const tbx_dtype *dts, size_t ntypes,
                                  unsigned seed, wq_run_fn run) {
    rng_seed(seed);
    const int64_t rowlen[] = {256, 32 * 13, 4096};
    const size_t n256 = KREF_NMODES * 8;
    float *x = xmalloc(n256 * 256 * 4), *qw = xmalloc(4096 * 4);
    for (size_t k = 0; k < n256; k++) kref_edge_block(x + 256 * k, (int)(k % KREF_NMODES));
    for (int mode = 0; mode < 3; mode++) {
        for (int i = 0; i < 4096; i++)
            qw[i] = mode == 0 ? (float)(0.05 + rndu() * 4) : mode == 1 ? (rnd32() % 3 ? 1.0f : 0.0f)
                                                                      : (float)(rndu() * 1e30);
        for (size_t t = 0; t < ntypes; t++)
            for (size_t r = 0; r < sizeof rowlen / sizeof *rowlen; r++) {
                const int64_t n = rowlen[r];
                const size_t bs = info(dts[t])->block_size, bb = info(dts[t])->block_bytes;
                if (n % (int64_t)bs) continue;
                const int64_t nrows = (int64_t)(n256 * 256) / n;
                const size_t bytes = (size_t)(nrows * n) / bs * bb;
                uint8_t *a = xmalloc(bytes), *c = xmalloc(bytes);
                memset(a, 0x11, bytes);
                memset(c, 0x33, bytes);
                run(t, false, x, a, nrows, n, qw);
                run(t, true, x, c, nrows, n, qw);
                if (memcmp(a, c, bytes) != 0)
                    fprintf(stderr, "%s: scalar and avx2 %s differ (row %lld, matrix mode %d)\n",
                            info(dts[t])->name, what, (long long)n, mode);
                CHECK(memcmp(a, c, bytes) == 0);
                free(a);
                free(c);
            }
    }
    free(x);
    free(qw);
}

static void run_symm(size_t t, bool simd, const float *x, void *dst, int64_t nrows, int64_t n,
                     const float *qw) {
    typedef void (*with_fn)(tbx_wq_symm8_fn, const float *, void *, int64_t, int64_t, const float *);
    static const with_fn fns[] = {tbx_gq_rows_q4_0_with, tbx_gq_rows_q5_0_with, tbx_gq_rows_q3_K_with,
                                  tbx_gq_rows_q6_K_with};
    fns[t](simd ? tbx_wq_symm8_avx2() : NULL, x, dst, nrows, n, qw);
}

TBX_TEST(weighted_symm_avx2_matches_scalar) {
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_wq_symm8_avx2()) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    static const tbx_dtype dts[] = {TBX_DT_Q4_0, TBX_DT_Q5_0, TBX_DT_Q3_K, TBX_DT_Q6_K};
    check_weighted_kernel("fits", dts, sizeof dts / sizeof *dts, 8088, run_symm);
}

static void run_affine(size_t t, bool simd, const float *x, void *dst, int64_t nrows, int64_t n,
                       const float *qw) {
    typedef void (*with_fn)(tbx_wq_aff8_fn, const float *, void *, int64_t, int64_t, const float *);
    static const with_fn fns[] = {tbx_gq_rows_q4_1_with, tbx_gq_rows_q5_1_with, tbx_gq_rows_q2_K_with,
                                  tbx_gq_rows_q4_K_with, tbx_gq_rows_q5_K_with};
    fns[t](simd ? tbx_wq_aff8_avx2() : NULL, x, dst, nrows, n, qw);
}

TBX_TEST(weighted_affine_avx2_matches_scalar) {
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_wq_aff8_avx2()) {
        printf("no AVX2 kernels on this CPU or build: skipped\n");
        return;
    }
    static const tbx_dtype dts[] = {TBX_DT_Q4_1, TBX_DT_Q5_1, TBX_DT_Q2_K, TBX_DT_Q4_K, TBX_DT_Q5_K};
    check_weighted_kernel("affine fits", dts, sizeof dts / sizeof *dts, 9099, run_affine);
}

/* Every AVX2 quantizer kernel returns with the upper halves of the vector registers clean
 * (XINUSE bit 2 of XGETBV(1) clear): SSE code running after a return with dirty upper halves
 * was measured 3-6x slower on this machine (ggml's and tensorbox's scalar quantizers). */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
static int xinuse_supported(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    if (__get_cpuid_max(0, NULL) < 0xD) return 0;
    __cpuid_count(0xD, 1, a, b, c, d);
    return (a & 4u) != 0; /* XGETBV with ECX = 1 */
}
static unsigned ymm_upper_dirty(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    (void)hi;
    return lo & 4u;
}
#else
static int xinuse_supported(void) { return 0; }
static unsigned ymm_upper_dirty(void) { return 0; }
#endif

TBX_TEST(avx2_quantizers_return_with_clean_upper_state) {
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_ggml_quant_kref_avx2_for(TBX_DT_Q4_K) ||
        !xinuse_supported()) {
        printf("no AVX2 kernels or no XGETBV(1) on this CPU: skipped\n");
        return;
    }
    rng_seed(31337);
    float *x = xmalloc(4096 * 4), *w = xmalloc(4096 * 4);
    uint8_t *o = xmalloc(4096 * 2);
    for (int i = 0; i < 4096; i++) {
        x[i] = (float)gauss();
        w[i] = (float)(0.1 + rndu());
    }
    static const tbx_dtype all[] = {TBX_DT_Q8_0,  TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q5_0, TBX_DT_Q5_1,
                                    TBX_DT_MXFP4, TBX_DT_TQ1_0, TBX_DT_TQ2_0, TBX_DT_Q1_0, TBX_DT_Q2_0,
                                    TBX_DT_Q2_K,  TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K,
                                    TBX_DT_IQ4_NL, TBX_DT_IQ4_XS};
    for (size_t t = 0; t < sizeof all / sizeof *all; t++) {
        const tbx_dtype dt = all[t];
        const tbx_quant_rows_fn rows = tbx_ggml_quant_rows_for(dt);
        CHECK(rows != NULL);
        if (!rows) continue;
        for (int weighted = 0; weighted < 2; weighted++) {
            rows(x, o, 1, 4096, weighted ? w : NULL);
            const unsigned dirty = ymm_upper_dirty();
            if (dirty) fprintf(stderr, "%s%s: returns with dirty upper halves\n", info(dt)->name,
                               weighted ? " (importance matrix)" : "");
            CHECK_EQ(dirty, 0);
        }
    }
    free(x);
    free(w);
    free(o);
}

TBX_TEST(kquant_rmse_not_worse_than_ggml_reference) {
    static const tbx_dtype kt[] = {TBX_DT_Q2_K, TBX_DT_Q3_K, TBX_DT_Q4_K, TBX_DT_Q5_K, TBX_DT_Q6_K};
    const size_t nblocks = 512;
    float *x = xmalloc(nblocks * 256 * 4);
    for (int dist = 0; dist < NDIST; dist++) {
        rng_seed(1000 + (uint64_t)dist);
        fill(x, nblocks * 256, dist);
        for (size_t t = 0; t < sizeof kt / sizeof *kt; t++) {
            const tbx_dtype dt = kt[t];
            tbx_quant_fn mine = tbx_ggml_quant_for(dt), ref = tbx_ggml_quant_ref_for(dt);
            CHECK(mine != NULL && ref != NULL);
            if (!mine || !ref) continue;
            double rms;
            const double em = rmse_of(dt, mine, x, nblocks, &rms);
            const double er = rmse_of(dt, ref, x, nblocks, NULL);
            printf("%-5s %-9s rmse/rms tensorbox %.5f  ggml-ref %.5f  (%.1f%%)\n", info(dt)->name,
                   kDistName[dist], em / rms, er / rms, 100.0 * (em - er) / er);
            CHECK(em <= er);
        }
    }
    free(x);
}

TBX_TEST_MAIN()
