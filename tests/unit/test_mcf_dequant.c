/*
 * test_mcf_dequant.c - the MCF q/k layout and scalar row decoders (src/quant/mcf_dequant.c)
 * against the numbers of ../shared/specs/NOTES.md (payload sizes for 2x40, the bit-packing
 * vectors) and mantle's decoding rules written out independently here (f16 scales with
 * subnormals flushed, +0 for zero scales, u6 masked to 6 bits, S * (u6/32) then q * s).
 */
#include "tbx_test.h"
#include "api.h"
#include "mcfq.h"

#include <math.h>

TBX_TEST(layout_sizes_2x40) {
    /* NOTES: check values for 2x40: q8 192, q4 128, k6 224, k4 192, k3 176, k2 160 */
    static const uint64_t want[TBX_MCFQ_KIND_COUNT] = { 192, 128, 224, 192, 176, 160 };
    for (int k = 0; k < TBX_MCFQ_KIND_COUNT; k++) {
        tbx_mcfq_layout L;
        CHECK_OK(tbx_mcfq_layout_get((tbx_mcfq_kind)k, 2, 40, &L));
        CHECK_EQ(L.total, want[k]);
        CHECK_EQ(L.bpr, 2);
        CHECK_EQ(L.codes_off % 64, 0);
        CHECK_EQ(L.codes_off + L.codes_size, L.total);
    }
    tbx_mcfq_layout L;
    CHECK_OK(tbx_mcfq_layout_get(TBX_MCFQ_K4, 3, 300, &L)); /* bpr 10, spr 2 */
    CHECK_EQ(L.spr, 2);
    CHECK_EQ(L.scales_size, 12);
    CHECK_EQ(L.sub_off, 64);
    CHECK_EQ(L.sub_size, 30);
    CHECK_EQ(L.codes_off, 128);
    CHECK_EQ(L.total, 128 + 30 * 16);
    CHECK_EQ(tbx_mcfq_layout_get(TBX_MCFQ_Q8, UINT64_MAX / 2, 64, &L), TBX_E_OVERFLOW);
    CHECK_EQ(tbx_mcfq_layout_get(TBX_MCFQ_KIND_COUNT, 1, 1, &L), TBX_E_INVALID_ARG);
    CHECK_OK(tbx_mcfq_layout_get(TBX_MCFQ_K2, 0, 7, &L));
    CHECK_EQ(L.total, 0);
}

/* One row of `n` values with every scale 1.0 (f16 0x3C00; k: u6 32), codes from `bytes`. */
static void decode_unit(tbx_mcfq_kind kind, const uint8_t *bytes, size_t nb, uint64_t n,
                        float *out) {
    tbx_mcfq_layout L;
    tbx_mcfq_layout_get(kind, 1, n, &L);
    uint8_t buf[512] = { 0 };
    for (uint64_t i = 0; i < (L.super ? L.spr : L.bpr); i++) tbx_st16(buf + 2 * i, 0x3C00);
    for (uint64_t i = 0; i < L.sub_size; i++) buf[L.sub_off + i] = 32;
    memcpy(buf + L.codes_off, bytes, nb);
    tbx_mcfq_dequant_rows_ref(&L, buf, L.super ? buf + L.sub_off : NULL, buf + L.codes_off, 1, out);
}

TBX_TEST(bit_packing_vectors) {
    float o[32];
    static const uint8_t k3[] = { 0xb9, 0x8a, 0x39 };
    decode_unit(TBX_MCFQ_K3, k3, 3, 8, o);
    static const float k3v[] = { 1, -1, 2, -3, 0, 3, -2, 1 };
    for (int i = 0; i < 8; i++) CHECK(o[i] == k3v[i]);
    static const uint8_t k6[] = { 0xc1, 0xff, 0x85 };
    decode_unit(TBX_MCFQ_K6, k6, 3, 4, o);
    static const float k6v[] = { 1, -1, 31, -31 };
    for (int i = 0; i < 4; i++) CHECK(o[i] == k6v[i]);
    static const uint8_t k2[] = { 0x4d };
    decode_unit(TBX_MCFQ_K2, k2, 1, 4, o);
    static const float k2v[] = { 1, -1, 0, 1 };
    for (int i = 0; i < 4; i++) CHECK(o[i] == k2v[i]);
    static const uint8_t n4[] = { 0x93 };
    decode_unit(TBX_MCFQ_Q4, n4, 1, 2, o);
    CHECK(o[0] == 3 && o[1] == -7);
    decode_unit(TBX_MCFQ_K4, n4, 1, 2, o);
    CHECK(o[0] == 3 && o[1] == -7);
    static const uint8_t q8[] = { 0x7f, 0x81, 0x80, 0x00, 0x05 };
    decode_unit(TBX_MCFQ_Q8, q8, 5, 5, o);
    CHECK(o[0] == 127 && o[1] == -127 && o[2] == -128 && o[3] == 0 && o[4] == 5);
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Random payloads decoded against a reference written from the rules (bit by bit). */
static uint64_t rs = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

static float ref_f16(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float s = (h >> 15) ? -1.0f : 1.0f;
    if (e == 0) return s * 0.0f;
    if (e == 31) { uint32_t u = ((uint32_t)(h >> 15) << 31) | 0x7F800000u | ((uint32_t)m << 13);
                   float f; memcpy(&f, &u, 4); return f; }
    return s * ldexpf(1.0f + (float)m / 1024.0f, e - 15);
}

TBX_TEST(random_rows_match_rules) {
    for (int kind = 0; kind < TBX_MCFQ_KIND_COUNT; kind++) {
        for (int trial = 0; trial < 20; trial++) {
            uint64_t rows = 1 + rnd() % 4, cols = 1 + rnd() % 600;
            tbx_mcfq_layout L;
            CHECK_OK(tbx_mcfq_layout_get((tbx_mcfq_kind)kind, rows, cols, &L));
            uint8_t *p = calloc(1, L.total);
            float *o = malloc(rows * cols * 4);
            for (uint64_t i = 0; i < L.total; i++) p[i] = (uint8_t)rnd();
            /* scales: mostly normal values, some zero / subnormal / -0 / Inf / NaN */
            uint64_t ns = L.scales_size / 2;
            for (uint64_t i = 0; i < ns; i++) {
                uint16_t h = (uint16_t)(0x2000 + rnd() % 0x2000) | (uint16_t)(rnd() & 0x8000);
                switch (rnd() % 16) {
                case 0: h = 0; break;
                case 1: h = 0x8000; break;
                case 2: h = (uint16_t)(1 + rnd() % 0x3FF); break;
                case 3: h = 0x7C00; break;
                case 4: h = 0x7E01; break;
                default: break;
                }
                tbx_st16(p + 2 * i, h);
            }
            tbx_mcfq_dequant_rows_ref(&L, p, L.super ? p + L.sub_off : NULL, p + L.codes_off,
                                      rows, o);
            int bad = 0;
            for (uint64_t r = 0; r < rows; r++)
                for (uint64_t c = 0; c < cols; c++) {
                    uint64_t b = r * L.bpr + c / 32;
                    float s;
                    if (!L.super) s = ref_f16(tbx_ld16(p + 2 * b));
                    else {
                        float S = ref_f16(tbx_ld16(p + 2 * (r * L.spr + (c / 32) / 8)));
                        unsigned u6 = p[L.sub_off + b] % 64;
                        s = (S == 0 || u6 == 0) ? 0.0f : S * ((float)u6 / 32.0f);
                    }
                    uint64_t bit0 = (r * L.bpr * 32 + c) * L.bits;
                    int32_t v = 0;
                    for (uint32_t i = 0; i < L.bits; i++)
                        v |= (int32_t)((p[L.codes_off + (bit0 + i) / 8] >> ((bit0 + i) % 8)) & 1) << i;
                    if (v >> (L.bits - 1)) v -= 1 << L.bits;
                    float want = s == 0 ? 0.0f : (float)v * s;
                    if (fbits(want) != fbits(o[r * cols + c])) bad++;
                }
            CHECK_EQ(bad, 0);
            /* the same rows decoded from the middle (row offsets of the contract) */
            if (rows > 1) {
                tbx_mcfq_dequant_rows(&L, p + 2 * (L.super ? L.spr : L.bpr),
                                      L.super ? p + L.sub_off + L.bpr : NULL,
                                      p + L.codes_off + L.row_code_bytes, rows - 1, o);
                float *o2 = malloc(rows * cols * 4);
                tbx_mcfq_dequant_rows_ref(&L, p, L.super ? p + L.sub_off : NULL,
                                          p + L.codes_off, rows, o2);
                CHECK(memcmp(o, o2 + cols, (rows - 1) * cols * 4) == 0);
                free(o2);
            }
            free(p);
            free(o);
        }
    }
}

TBX_TEST(zero_scales_give_positive_zero) {
    tbx_mcfq_layout L;
    CHECK_OK(tbx_mcfq_layout_get(TBX_MCFQ_Q8, 1, 32, &L));
    uint8_t p[128] = { 0 };
    for (int i = 0; i < 32; i++) p[L.codes_off + i] = 0x81; /* -127 */
    float o[32];
    tbx_st16(p, 0x8000); /* -0: +0 out, not -0 * -127 */
    tbx_mcfq_dequant_rows_ref(&L, p, NULL, p + L.codes_off, 1, o);
    CHECK_EQ(fbits(o[0]), 0);
    tbx_st16(p, 0x8001); /* negative subnormal: flushed */
    tbx_mcfq_dequant_rows_ref(&L, p, NULL, p + L.codes_off, 1, o);
    CHECK_EQ(fbits(o[5]), 0);
    tbx_st16(p, 0x0400); /* smallest normal: kept */
    tbx_mcfq_dequant_rows_ref(&L, p, NULL, p + L.codes_off, 1, o);
    CHECK(o[3] == -127.0f * ldexpf(1.0f, -14));
    /* k: the top two bits of the sub-scale byte are ignored */
    CHECK_OK(tbx_mcfq_layout_get(TBX_MCFQ_K4, 1, 32, &L));
    uint8_t k[256] = { 0 };
    tbx_st16(k, 0x3C00);
    k[L.sub_off] = 0xC0 | 16;
    for (int i = 0; i < 16; i++) k[L.codes_off + i] = 0x77;
    tbx_mcfq_dequant_rows_ref(&L, k, k + L.sub_off, k + L.codes_off, 1, o);
    CHECK(o[0] == 3.5f && o[31] == 3.5f);
    k[L.sub_off] = 0xC0; /* u6 0 */
    tbx_mcfq_dequant_rows_ref(&L, k, k + L.sub_off, k + L.codes_off, 1, o);
    CHECK_EQ(fbits(o[7]), 0);
}

TBX_TEST_MAIN()
