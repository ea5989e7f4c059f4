/*
 * ztensor_common.c - what the zTensor reader (ztensor_open.c and the files it lists) and writer
 * (ztensor_write.c) share besides the CBOR codec (ztensor_cbor.c): the dtype names, the component
 * role and layout names, the digests (CRC-32C, SHA-256). It calls neither. (zstd's contexts
 * through a tbx_alloc are src/io/zstream.c's.)
 */
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
