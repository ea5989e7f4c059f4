/*
 * ggml_tables.h - codebooks of the ggml block types (part of those formats' definitions).
 *
 * Grid entries pack one small value per byte, element j in byte j (bits 8j..8j+7), so
 * (uint8_t)(grid[k] >> 8*j) is element j of codebook entry k on any host byte order.
 */
#ifndef TBX_GGML_TABLES_H
#define TBX_GGML_TABLES_H

#include <stdint.h>

extern const uint64_t tbx_iq2xxs_grid[256];  /* iq2_xxs: 8 x {0x08,0x19,0x2b} */
extern const uint64_t tbx_iq2xs_grid[512];   /* iq2_xs:  8 x {0x08,0x19,0x2b} */
extern const uint64_t tbx_iq2s_grid[1024];   /* iq2_s:   8 x {0x08,0x19,0x2b} */
extern const uint32_t tbx_iq3xxs_grid[256];  /* iq3_xxs: 4 x {4,12,...,52,62} */
extern const uint32_t tbx_iq3s_grid[512];    /* iq3_s:   4 x {1,3,...,15} */
extern const uint64_t tbx_iq1s_grid[2048];   /* iq1_s/iq1_m: 8 x int8 {-1,0,1} (0xff = -1) */
/* 7 sign bits -> 8 sign bits with even parity (bit j set: element j negative). */
extern const uint8_t tbx_ksigns_iq2xs[128];
/* Non-linear 4-bit levels of iq4_nl / iq4_xs. */
extern const int8_t tbx_kvalues_iq4nl[16];
/* E2M1 values doubled (mxfp4, nvfp4): {0,1,2,3,4,6,8,12} and their negatives. */
extern const int8_t tbx_kvalues_mxfp4[16];

#define TBX_IQ1S_DELTA 0.125f

#endif /* TBX_GGML_TABLES_H */
