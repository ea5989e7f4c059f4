/*
 * oinf_int.h - the OINF driver's private header: oinf_common.c (defined below, used by both
 * halves), oinf.c (reading, validation), oinf_write.c (writing) and oinf_driver.c (the table).
 * Nothing here is used outside src/formats/oinf*.c.
 */
#ifndef TBX_OINF_INT_H
#define TBX_OINF_INT_H

#include "io.h"
#include "oinf.h"

#define OI_HEADER_PACKED 69u  /* magic 5 + u32 x6 + u64 x5 */
#define OI_HEADER_SIZE 72u    /* the packed header zero-padded to 8 */
#define OI_QUANT_HEADER 48u   /* u32 x4 + u64 x4 before the scales */
#define OI_ALIGN 8u
#define OI_MAX_VERSION 2u

/* Tensor flags */
#define OI_HAS_DATA 0x1u
#define OI_HAS_QUANT 0x2u     /* version 2 only */

/* Value type tags (the ValueType table of the format). */
enum {
    OI_I8 = 1, OI_I16 = 2, OI_I32 = 3, OI_I64 = 4, OI_U8 = 5, OI_U16 = 6, OI_U32 = 7, OI_U64 = 8,
    OI_F16 = 9, OI_F32 = 10, OI_F64 = 11, OI_BOOL = 12, OI_BITSET = 13, OI_STRING = 14,
    OI_NDARRAY = 15, OI_BF16 = 16, OI_F8 = 17, OI_I4 = 18, OI_I2 = 19, OI_I1 = 20, OI_U4 = 21,
    OI_U2 = 22, OI_U1 = 23, OI_T2 = 24, OI_T1 = 25, OI_TAG_MAX = 25
};

typedef struct oi_type {
    const char *name;      /* the reference's short name: "i8", "str", "f8", ... */
    tbx_dtype dtype;       /* element dtype (tensors, NDARRAY elements); INVALID for str/ndarray */
    tbx_value_type vtype;  /* metadata scalar value type; NULL when it has none (F8, packed) */
    uint8_t size;          /* bytes of one scalar payload (packed scalars: 1); 0 for var-size */
    uint8_t bits;          /* bits per packed element; 0 for byte-sized elements */
} oi_type;

/* The entry of tag t, or NULL when t is not a tag of the format. */
const oi_type *oi_type_of(uint32_t tag);
/* The tag of an element dtype, or 0 when OINF has no such type. */
uint32_t oi_tag_of_dtype(tbx_dtype dt);
/* May a tensor (resp. an NDARRAY element) be of this tag? */
static inline bool oi_tensor_tag(uint32_t t) { return (t >= 1 && t <= 13) || (t >= 16 && t <= 25); }
/* Can the writer store tensors of dtype dt (the driver's w_dtype_ok and oi_w_check_tensor)? */
bool oi_w_dtype_ok(tbx_dtype dt);
/* Metadata value types the writer stores (tbx_driver.meta_types): the scalars, string, bitset,
 * ndarray and arrays of scalars (ow_meta). */
#define OI_META_TYPES                                                                           \
    (TBX_VBIT(TBX_V_BOOL) | TBX_VBIT(TBX_V_U8) | TBX_VBIT(TBX_V_I8) | TBX_VBIT(TBX_V_U16) |     \
     TBX_VBIT(TBX_V_I16) | TBX_VBIT(TBX_V_U32) | TBX_VBIT(TBX_V_I32) | TBX_VBIT(TBX_V_U64) |    \
     TBX_VBIT(TBX_V_I64) | TBX_VBIT(TBX_V_F16) | TBX_VBIT(TBX_V_BF16) | TBX_VBIT(TBX_V_F32) |   \
     TBX_VBIT(TBX_V_F64) | TBX_VBIT(TBX_V_STRING) | TBX_VBIT(TBX_V_BITSET) |                   \
     TBX_VBIT(TBX_V_NDARRAY) | TBX_VBIT(TBX_V_ARRAY))
static inline bool oi_element_tag(uint32_t t) { return (t >= 1 && t <= 12) || (t >= 16 && t <= 25); }
static inline bool oi_packed_tag(uint32_t t) { return t >= OI_I4 && t <= OI_T1; }

/* Is [p, p+n) a non-empty string of [A-Za-z0-9._-]? *bad gets the index of the first byte that is
 * not (n when the string is empty). */
bool oi_charset_ok(const char *p, size_t n, size_t *bad);
/* Human rendering of the offending byte of a string for messages ("' '", "0x0a"). */
void oi_describe_byte(char out[16], unsigned char c);

/* Checks quantization parameters against a tensor's shape (the rules in docs/formats/oinf.md).
 * On failure fills *err (code TBX_E_FORMAT, the field "tensor.quant.<member>", offset `at`) and
 * returns its code. `q->scales` / `q->zero_points` are not looked at. */
tbx_status oi_quant_check(const tbx_oinf_quant *q, const uint64_t *shape, uint32_t ndim,
                          const char *tensor, uint64_t at, tbx_error *err);
/* Payload size of quantization parameters: align8(48 + 4 * scale_count + 4 * zp_count). False on
 * overflow. */
bool oi_quant_nbytes(uint64_t scale_count, uint64_t zp_count, uint64_t *out);

/* Names of the metadata entries that mirror a tensor's quantization parameters:
 * "<tensor>" OI_QKEY_PREFIX "<member>". */
#define OI_QKEY_PREFIX ".quant."
#define OI_QKEY_SCHEME "scheme"
#define OI_QKEY_SCALE_MODE "scale_mode"
#define OI_QKEY_SCALE_AXIS "scale_axis"
#define OI_QKEY_SCALES "scales"
#define OI_QKEY_ZP_MODE "zp_mode"
#define OI_QKEY_ZP_AXIS "zp_axis"
#define OI_QKEY_ZPS "zero_points"

/* Little-endian host? (the in-memory element layout of values; files are little-endian) */
static inline bool oi_host_le(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}
/* Copies n elements of `width` bytes, swapping each when the host is big-endian (native <-> LE). */
void oi_copy_le(uint8_t *dst, const uint8_t *src, uint64_t n, unsigned width);

/* The driver table (oinf_driver.c); declared here too so that the driver's files do not depend on the
 * registration in internal.h. */
extern const tbx_driver tbx_driver_oinf;

/* Reader hooks (oinf.c), for the driver table (oinf_driver.c). */
bool oi_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status oi_open(tbx_file *f, tbx_error *err);
tbx_status oi_validate(tbx_file *f, tbx_error *err);
void oi_close(tbx_file *f);

/* Writer hooks (oinf_write.c), for the driver table (oinf_driver.c). */
tbx_status oi_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                           tbx_error *err);
tbx_status oi_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status oi_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                            tbx_error *err);
tbx_status oi_w_layout(tbx_writer *w, tbx_error *err);
void oi_w_free(tbx_writer *w);

#endif /* TBX_OINF_INT_H */
