/*
 * crc32c.c - CRC-32C (Castagnoli), for zTensor's "crc32c:0x%08X" component digests.
 *
 * CRC-32C is the reflected CRC with polynomial 0x1EDC6F41 (0x82F63B78 bit-reversed), initial
 * value 0xFFFFFFFF and final XOR 0xFFFFFFFF. Check value: "123456789" -> 0xE3069283.
 *
 * Why it is written here: no Debian library exports CRC-32C (zlib and libdeflate only have the
 * CRC-32 of zip/gzip), and the digest is computed over every stored byte of a component, so it
 * must run near memory speed. Two paths, both computing the "raw" register update R(c, data)
 * (no pre/post inversion; tbx_crc32c() adds those):
 *
 *   table path   slice-by-8: eight 256-entry tables, eight input bytes per step.
 *   SSE4.2 path  the `crc32` instruction on 8-byte words. The instruction has a latency of 3
 *                cycles but a throughput of 1 per cycle, so blocks of 3 x ZT_LANE bytes are run
 *                as three independent lanes and joined with the linearity of the CRC:
 *
 *                  +------ lane A ------+------ lane B ------+------ lane C ------+
 *                  | a = R(crc, A)      | b = R(0, B)        | c = R(0, C)        |
 *                  +--------------------+--------------------+--------------------+
 *                  R(crc, A||B||C) = S(S(a) ^ b) ^ c,   S(x) = R(x, ZT_LANE zero bytes)
 *
 *                S is linear in x, so it is four 256-entry tables, built once at start-up.
 *
 * The SSE4.2 path is compiled with a function-level target attribute (no global -msse4.2) and
 * chosen at run time with __builtin_cpu_supports("sse4.2"). Measured throughput of both paths:
 * docs/formats/ztensor.md. tests/unit/test_ztensor.c checks both against known vectors and
 * against each other on random data, lengths and alignments.
 *
 * Byte diagram of one slice-by-8 step (little-endian 8-byte load w, register c):
 *
 *     w = b0 b1 b2 b3 | b4 b5 b6 b7        x = c ^ (b0 | b1<<8 | b2<<16 | b3<<24)
 *     c' = T7[x&255] ^ T6[x>>8&255] ^ T5[x>>16&255] ^ T4[x>>24]
 *        ^ T3[b4] ^ T2[b5] ^ T1[b6] ^ T0[b7]
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ZT_HAVE_SSE42_PATH 1
#include <nmmintrin.h>
#else
#define ZT_HAVE_SSE42_PATH 0
#endif

#define ZT_POLY 0x82F63B78u
#define ZT_LANE 4096u /* bytes per lane of the 3-lane SSE4.2 loop (a multiple of 8) */

static uint32_t zt_tab[8][256];    /* slice-by-8 tables */
static uint32_t zt_shift[4][256];  /* S(x) = R(x, ZT_LANE zero bytes), byte by byte */
static pthread_once_t zt_once = PTHREAD_ONCE_INIT;

/* R(c, n zero bytes) with the bytewise table (used only to build zt_shift). */
static uint32_t zt_zeros(uint32_t c, size_t n) {
    while (n--) c = zt_tab[0][c & 0xFFu] ^ (c >> 8);
    return c;
}

static void zt_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ ZT_POLY : c >> 1;
        zt_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            zt_tab[t][i] = (zt_tab[t - 1][i] >> 8) ^ zt_tab[0][zt_tab[t - 1][i] & 0xFFu];
    /* S is linear: S(x) = XOR of S(bit) over the set bits of x. 32 basis values, then tables. */
    uint32_t basis[32];
    for (int b = 0; b < 32; b++) basis[b] = zt_zeros((uint32_t)1 << b, ZT_LANE);
    for (int k = 0; k < 4; k++) {
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t s = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b)) s ^= basis[8 * k + b];
            zt_shift[k][v] = s;
        }
    }
}

static inline void zt_ready(void) { (void)pthread_once(&zt_once, zt_init); }

static inline uint32_t zt_apply_shift(uint32_t x) {
    return zt_shift[0][x & 0xFFu] ^ zt_shift[1][(x >> 8) & 0xFFu] ^
           zt_shift[2][(x >> 16) & 0xFFu] ^ zt_shift[3][x >> 24];
}

static inline uint32_t zt_ld32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Raw register update, slice-by-8. */
static uint32_t zt_raw_sw(uint32_t c, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7u)) {
        c = zt_tab[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t x = c ^ zt_ld32(p);
        c = zt_tab[7][x & 0xFFu] ^ zt_tab[6][(x >> 8) & 0xFFu] ^ zt_tab[5][(x >> 16) & 0xFFu] ^
            zt_tab[4][x >> 24] ^ zt_tab[3][p[4]] ^ zt_tab[2][p[5]] ^ zt_tab[1][p[6]] ^
            zt_tab[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = zt_tab[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c;
}

uint32_t tbx_crc32c_sw(uint32_t crc, const void *data, size_t n) {
    zt_ready();
    if (!data || n == 0) return crc;
    return ~zt_raw_sw(~crc, (const uint8_t *)data, n);
}

#if ZT_HAVE_SSE42_PATH
static inline uint64_t zt_ld64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* x86 is little-endian */
}

__attribute__((target("sse4.2"))) static uint32_t zt_raw_hw(uint32_t c, const uint8_t *p,
                                                             size_t n) {
    while (n && ((uintptr_t)p & 7u)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
#if defined(__x86_64__)
    /* Three lanes of ZT_LANE bytes each, joined with the shift tables. */
    while (n >= 3u * ZT_LANE) {
        uint64_t a = c, b = 0, d = 0;
        const uint8_t *pa = p, *pb = p + ZT_LANE, *pc = p + 2u * ZT_LANE;
        for (size_t i = 0; i < ZT_LANE; i += 8) {
            a = _mm_crc32_u64(a, zt_ld64(pa + i));
            b = _mm_crc32_u64(b, zt_ld64(pb + i));
            d = _mm_crc32_u64(d, zt_ld64(pc + i));
        }
        c = zt_apply_shift(zt_apply_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
        p += 3u * ZT_LANE;
        n -= 3u * ZT_LANE;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = _mm_crc32_u64(c64, zt_ld64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
#else
    while (n >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c = _mm_crc32_u32(c, w);
        p += 4;
        n -= 4;
    }
#endif
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}

int tbx_crc32c_hw_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

uint32_t tbx_crc32c_hw(uint32_t crc, const void *data, size_t n) {
    zt_ready();
    if (!data || n == 0) return crc;
    if (!tbx_crc32c_hw_available()) return ~zt_raw_sw(~crc, (const uint8_t *)data, n);
    return ~zt_raw_hw(~crc, (const uint8_t *)data, n);
}
#else
int tbx_crc32c_hw_available(void) { return 0; }

uint32_t tbx_crc32c_hw(uint32_t crc, const void *data, size_t n) {
    return tbx_crc32c_sw(crc, data, n);
}
#endif

uint32_t tbx_crc32c(uint32_t crc, const void *data, size_t n) {
#if ZT_HAVE_SSE42_PATH
    if (__builtin_cpu_supports("sse4.2")) return tbx_crc32c_hw(crc, data, n);
#endif
    return tbx_crc32c_sw(crc, data, n);
}
