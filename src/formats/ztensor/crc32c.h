/*
 * crc32c.h - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as zTensor digests use it.
 *
 * No Debian library offers CRC-32C (zlib and libdeflate compute CRC-32/ISO-HDLC only), so
 * src/formats/crc32c.c implements it: a portable slice-by-8 table walk, and on x86-64 a path
 * through the SSE4.2 `crc32` instruction, chosen once at run time (__builtin_cpu_supports);
 * the library itself is never built with -msse4.2. docs/formats/ztensor.md gives the measured
 * throughput of both paths.
 *
 * All functions continue a running CRC the way zlib's crc32() does: start with crc = 0, pass
 * the previous result to append more bytes. tbx_crc32c(0, "123456789", 9) == 0xE3069283.
 * Not public API: used by the zTensor driver and its tests.
 */
#ifndef TBX_CRC32C_H
#define TBX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of n bytes appended to a running CRC `crc` (0 to start). Uses the fastest path the
 * CPU supports. */
uint32_t tbx_crc32c(uint32_t crc, const void *data, size_t n);

/* The portable slice-by-8 path (always available). */
uint32_t tbx_crc32c_sw(uint32_t crc, const void *data, size_t n);

/* The SSE4.2 path. Only call it when tbx_crc32c_hw_available() is non-zero; on other builds it
 * falls back to the portable path. */
uint32_t tbx_crc32c_hw(uint32_t crc, const void *data, size_t n);

/* Non-zero when this CPU (and build) has the SSE4.2 crc32 instruction path. */
int tbx_crc32c_hw_available(void);

#ifdef __cplusplus
}
#endif
#endif /* TBX_CRC32C_H */
