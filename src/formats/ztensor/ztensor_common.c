/*
 * ztensor_common.c - what the zTensor reader (ztensor.c) and writer (ztensor_write.c) share
 * besides the CBOR codec (ztensor_cbor.c): the dtype names, the component role names, the
 * digests (CRC-32C, SHA-256) and zstd's allocation through a tbx_alloc. It calls neither.
 */
/* The advanced zstd API (custom allocator), when the libzstd we link exports it (CMake check). It
 * must be requested before the first #include <zstd.h> (ztensor_int.h includes it). */
#ifdef TBX_HAVE_ZSTD_ADVANCED
#define ZSTD_STATIC_LINKING_ONLY
#endif
#include "ztensor_int.h"

#include "crc32c.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>

/* ------------------------------------------------------------------------------------------ */
/* dtypes, roles                                                                               */
/* ------------------------------------------------------------------------------------------ */
static const zt_dtype zt_dtypes[] = {
    {"f64", TBX_DT_F64, 8},         {"f32", TBX_DT_F32, 4},
    {"f16", TBX_DT_F16, 2},         {"bf16", TBX_DT_BF16, 2},
    {"f8_e4m3", TBX_DT_F8_E4M3, 1}, {"f8_e5m2", TBX_DT_F8_E5M2, 1},
    {"complex64", TBX_DT_C64, 8},   {"complex128", TBX_DT_C128, 16},
    {"i64", TBX_DT_I64, 8},         {"i32", TBX_DT_I32, 4},
    {"i16", TBX_DT_I16, 2},         {"i8", TBX_DT_I8, 1},
    {"u64", TBX_DT_U64, 8},         {"u32", TBX_DT_U32, 4},
    {"u16", TBX_DT_U16, 2},         {"u8", TBX_DT_U8, 1},
    {"bool", TBX_DT_BOOL, 1},
};
#define ZT_NDTYPES (sizeof zt_dtypes / sizeof zt_dtypes[0])

const zt_dtype *zt_dtype_by_name(const char *s, size_t n) {
    for (size_t i = 0; i < ZT_NDTYPES; i++)
        if (strlen(zt_dtypes[i].name) == n && memcmp(zt_dtypes[i].name, s, n) == 0)
            return &zt_dtypes[i];
    return NULL;
}

const zt_dtype *zt_dtype_by_tbx(tbx_dtype dt) {
    for (size_t i = 0; i < ZT_NDTYPES; i++)
        if (zt_dtypes[i].dtype == dt) return &zt_dtypes[i];
    return NULL;
}

const char *const zt_role_names[ZT_NROLES] = {
    "data", "values", "indices", "indptr", "coords", "packed_weight", "scales", "zeros",
};

/* Components of each layout, in model order. */
const int zt_layout_roles[4][3] = {
    {ZT_R_DATA, -1, -1},
    {ZT_R_VALUES, ZT_R_INDICES, ZT_R_INDPTR},
    {ZT_R_VALUES, ZT_R_COORDS, -1},
    {ZT_R_PACKED, ZT_R_SCALES, ZT_R_ZEROS},
};
const uint32_t zt_layout_ncomp[4] = {1, 3, 2, 3};
const char *const zt_layout_names[4] = {"dense", "sparse_csr", "sparse_coo",
                                               "quantized_group"};

/* ------------------------------------------------------------------------------------------ */
/* Digests                                                                                     */
/* ------------------------------------------------------------------------------------------ */
void zt_digest_str(const zt_digest *d, char *dst, size_t cap) {
    if (d->algo == ZT_H_CRC32C) {
        snprintf(dst, cap, "crc32c:0x%08" PRIX32, d->crc);
    } else if (d->algo == ZT_H_SHA256 && cap >= 7 + 65) {
        memcpy(dst, "sha256:", 7);
        for (int i = 0; i < 32; i++) snprintf(dst + 7 + 2 * i, 3, "%02x", d->sha[i]);
    } else if (cap) {
        dst[0] = 0;
    }
}


tbx_status zt_hash_init(zt_hash *h, int algo, tbx_error *err) {
    memset(h, 0, sizeof *h);
    h->algo = algo;
    if (algo == ZT_H_SHA256) {
        h->md = EVP_MD_CTX_new();
        if (!h->md || EVP_DigestInit_ex(h->md, EVP_sha256(), NULL) != 1) {
            EVP_MD_CTX_free(h->md);
            h->md = NULL;
            h->algo = ZT_H_NONE;
            return tbx_err(err, TBX_E_NOMEM, TBX_NO_OFFSET, "digest", "cannot set up SHA-256");
        }
    }
    return TBX_OK;
}

void zt_hash_update(zt_hash *h, const void *p, size_t n) {
    if (!h || n == 0) return;
    if (h->algo == ZT_H_CRC32C) h->crc = tbx_crc32c(h->crc, p, n);
    else if (h->algo == ZT_H_SHA256) (void)EVP_DigestUpdate(h->md, p, n);
}

void zt_hash_final(zt_hash *h, zt_digest *out) {
    memset(out, 0, sizeof *out);
    out->algo = h->algo;
    if (h->algo == ZT_H_CRC32C) out->crc = h->crc;
    else if (h->algo == ZT_H_SHA256) {
        unsigned len = 0;
        (void)EVP_DigestFinal_ex(h->md, out->sha, &len);
    }
}

void zt_hash_free(zt_hash *h) {
    if (h->md) EVP_MD_CTX_free(h->md);
    h->md = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* zstd through the handle's allocator (zstd's free() gets no size: keep it in a header)       */
/* ------------------------------------------------------------------------------------------ */
#define ZT_ZHDR 16u

void *zt_zalloc(void *opaque, size_t size) {
    const tbx_alloc *al = opaque;
    if (size > SIZE_MAX - ZT_ZHDR) return NULL;
    uint8_t *p = tbx_malloc(al, size + ZT_ZHDR);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    return p + ZT_ZHDR;
}

void zt_zfree(void *opaque, void *addr) {
    if (!addr) return;
    uint8_t *p = (uint8_t *)addr - ZT_ZHDR;
    size_t size;
    memcpy(&size, p, sizeof size);
    tbx_free(opaque, p, size + ZT_ZHDR);
}

ZSTD_DCtx *zt_dctx_new(const tbx_alloc *al) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_customMem cm = {zt_zalloc, zt_zfree, (void *)al};
    return ZSTD_createDCtx_advanced(cm);
#else
    (void)al; /* zstd allocates with malloc (see ztensor_int.h) */
    return ZSTD_createDCtx();
#endif
}

ZSTD_CCtx *zt_cctx_new(const tbx_alloc *al) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_customMem cm = {zt_zalloc, zt_zfree, (void *)al};
    return ZSTD_createCCtx_advanced(cm);
#else
    (void)al;
    return ZSTD_createCCtx();
#endif
}

bool zt_cctx_progress(ZSTD_CCtx *cctx, uint64_t *produced, uint64_t *consumed) {
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_frameProgression fp = ZSTD_getFrameProgression(cctx);
    *produced = fp.produced;
    *consumed = fp.consumed;
    return true;
#else
    (void)cctx;
    *produced = *consumed = 0;
    return false;
#endif
}

bool zt_frame_window_cost(const void *p, size_t n, uint64_t max_window, uint64_t *cost) {
    *cost = 0;
#ifdef TBX_HAVE_ZSTD_ADVANCED
    ZSTD_frameHeader h;
    if (ZSTD_getFrameHeader(&h, p, n) != 0 || h.frameType != ZSTD_frame) return true;
    if (h.windowSize > max_window) return true; /* the decoder refuses it */
    size_t b = ZSTD_decodingBufferSize_min(h.windowSize, h.frameContentSize);
    if (!ZSTD_isError(b)) *cost = b;
    return true;
#else
    (void)p;
    (void)n;
    *cost = max_window; /* unknown: assume the largest window the decoder accepts */
    return false;
#endif
}
