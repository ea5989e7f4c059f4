/*
 * mcf_int.h - the MCF driver's private header: mcf_common.c (defined below, used by both
 * halves), mcf.c (reading, validation), mcf_write.c (writing) and mcf_driver.c (the table).
 * Nothing here is used outside src/formats/mcf*.c. The layouts are described in mcf.c.
 */
#ifndef TBX_MCF_INT_H
#define TBX_MCF_INT_H

#ifndef TBX_EXPERIMENTAL
#define TBX_EXPERIMENTAL 1 /* the library's own code uses its experimental headers */
#endif
#include "io.h"
#include "tensorbox/mcf.h"
#include "mcfq.h"

#define MCF_HEADER_SIZE 40u
#define MCF_DIR_ENTRY 24u
#define MCF_MAJOR 1u
#define MCF_MINOR 1u
#define MCF_FLAG_ALIGNED64 1u
#define MCF_SECTION_ALIGN 8u
#define MCF_TENSOR_ALIGN 64u

/* Section types */
enum {
    MCF_SEC_MODELINFO = 0x0001, MCF_SEC_QUANTINFO = 0x0002, MCF_SEC_TENSORINDEX = 0x0003,
    MCF_SEC_TENSORDATA = 0x0004,
    MCF_SEC_HF_CONFIG = 0x0100, MCF_SEC_HF_GENCONFIG = 0x0101, MCF_SEC_HF_TOKENIZER = 0x0102,
    MCF_SEC_HF_TOKCONFIG = 0x0103, MCF_SEC_HF_VOCAB = 0x0104, MCF_SEC_HF_MERGES = 0x0105
};

#define MCF_MI_FIXED 88u      /* ModelInfo header (8) + fixed part (80) */
#define MCF_MI_KV 24u
#define MCF_TI_HEADER 48u
#define MCF_TI_ENTRY 40u
#define MCF_QI_HEADER 8u
#define MCF_QI_RECORD 24u

/* ModelInfo KV types */
enum { MCF_KV_U32 = 1, MCF_KV_F32 = 2, MCF_KV_STRING = 3 };

/* TensorIndex flags */
#define MCF_TI_SORTED 1u
#define MCF_TI_UTF8 2u

/* The file's dtype codes */
enum {
    MCF_DT_F32 = 1, MCF_DT_F16, MCF_DT_BF16, MCF_DT_F64, MCF_DT_I8, MCF_DT_U8, MCF_DT_I16,
    MCF_DT_U16, MCF_DT_I32, MCF_DT_U32, MCF_DT_I64, MCF_DT_U64,
    MCF_DT_INT8 = 0x10, MCF_DT_INT4 = 0x11, MCF_DT_Q8 = 0x20, MCF_DT_Q4 = 0x21,
    MCF_DT_K6 = 0x30, MCF_DT_K4 = 0x31, MCF_DT_K3 = 0x32, MCF_DT_K2 = 0x33
};

/* QuantInfo domains */
enum { MCF_DOMAIN_WEIGHTS = 0, MCF_DOMAIN_ACTIVATIONS = 1 };

/* tbx dtype of a file dtype code (TBX_DT_INVALID: unknown code), and back (0: none). */
tbx_dtype mcf_dtype_from_code(uint32_t code);
uint32_t mcf_code_from_dtype(tbx_dtype dt);
/* Is dt one of the driver's quantized dtypes (TBX_DT_MCF_*)? the q/k ones? */
static inline bool mcf_is_quant(tbx_dtype dt) { return dt >= TBX_DT_MCF_INT8 && dt <= TBX_DT_MCF_K2; }
static inline bool mcf_is_qk(tbx_dtype dt) { return dt >= TBX_DT_MCF_Q8 && dt <= TBX_DT_MCF_K2; }
static inline tbx_mcfq_kind mcf_kind(tbx_dtype dt) { return (tbx_mcfq_kind)(dt - TBX_DT_MCF_Q8); }
/* Block and super-block size QuantInfo must record for a quantized dtype. */
void mcf_quant_geometry(tbx_dtype dt, uint16_t *block, uint16_t *super);

/* Stored size of a tensor: plain dtypes numel * size; int8/int4 the scale region (64), the zero
 * region (64, activations domain only) and the codes; q/k as tbx_mcfq_layout_get (rank 2,
 * no zero dimension). TBX_E_OVERFLOW, or TBX_E_FORMAT (*why set) for a shape the dtype cannot
 * have. */
tbx_status mcf_payload_size(tbx_dtype dt, const uint64_t *shape, uint32_t ndim, int domain,
                            uint64_t *out, const char **why);
/* int8/int4: offset of the codes in the payload. */
static inline uint64_t mcf_int_codes_off(int domain) { return domain == MCF_DOMAIN_ACTIVATIONS ? 128 : 64; }

/* Section names: the HF file name of an HF type, "ModelInfo"... for the core ones, "unknown". */
const char *mcf_section_name(uint32_t type);
/* The HF section type of a file name (0: not one). */
uint32_t mcf_hf_type(const char *name, size_t len);

/* ModelInfo fields as metadata keys "mcf.<field>" (the order of the fixed part). */
typedef struct mcf_mi_field {
    const char *key;
    uint32_t off;          /* in the ModelInfo payload */
    tbx_value_type type;   /* U32 or F32 */
} mcf_mi_field;
extern const mcf_mi_field mcf_mi_fields[];
extern const size_t mcf_mi_nfields;
#define MCF_KEY_MODEL_NAME "mcf.model_name"
#define MCF_KEY_BASE_MODEL "mcf.base_model"
const char *mcf_arch_name(uint32_t arch);

/* The driver-specific dtype entries and their size hook (tbx_driver.dtypes/dtype_nbytes). */
extern const tbx_dtype_info mcf_dtypes[8];
tbx_status mcf_dtype_nbytes(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                            uint64_t *out);

/* Metadata value types the writer stores (ModelInfo fields and KV extras). */
#define MCF_META_TYPES                                                                          \
    (TBX_VBIT(TBX_V_U32) | TBX_VBIT(TBX_V_F32) | TBX_VBIT(TBX_V_STRING) | TBX_VBIT(TBX_V_BYTES))
bool mcf_w_dtype_ok(tbx_dtype dt);

extern const tbx_driver tbx_driver_mcf;

/* Reader hooks (mcf.c) */
bool mcf_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status mcf_open(tbx_file *f, tbx_error *err);
tbx_status mcf_read_f32(tbx_file *f, uint64_t i, uint64_t first, uint64_t count, float *out,
                        tbx_error *err);
tbx_status mcf_validate(tbx_file *f, tbx_error *err);
bool mcf_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c);
tbx_status mcf_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);
tbx_status mcf_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                              tbx_error *err);
void mcf_close(tbx_file *f);
tbx_status mcf_describe(const tbx_file *f, tbx_describer *d, tbx_error *err);

/* Writer hooks (mcf_write.c) */
tbx_status mcf_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err);
tbx_status mcf_w_check_section(tbx_writer *w, const char *name, uint32_t type, size_t len,
                               tbx_error *err);
tbx_status mcf_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status mcf_w_check_quant(tbx_writer *w, tbx_wtensor *t, const tbx_quant_info *q,
                             tbx_error *err);
tbx_status mcf_w_layout(tbx_writer *w, tbx_error *err);
tbx_status mcf_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err);
tbx_status mcf_w_tensor_done(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status mcf_w_finish(tbx_writer *w, tbx_error *err);
void mcf_w_free(tbx_writer *w);
extern const tbx_format_option mcf_w_options[];
tbx_status mcf_w_check_options(tbx_writer *w, tbx_error *err);

/* mcf_pack.c: mantle pack's treatment of a Hugging Face directory's files. */
/* Trims Go's unicode.IsSpace runes from both ends of the UTF-8 bytes [*p, *p + *n). */
void mcf_pack_trim(const uint8_t **p, size_t *n);
/* The tokenizer_config.json section pack writes from the file (cfg, have_cfg: it exists) and
 * chat_template.jinja (tpl, have_tpl): *out (allocated with al, *out_len bytes) or NULL when
 * pack writes no such section. TBX_E_FORMAT naming tokenizer_config.json when it is not JSON
 * or not an object. */
tbx_status mcf_pack_tokcfg(const tbx_alloc *al, const uint8_t *cfg, size_t cfg_len, bool have_cfg,
                           const uint8_t *tpl, size_t tpl_len, bool have_tpl, uint8_t **out,
                           size_t *out_len, tbx_error *err);

#endif /* TBX_MCF_INT_H */
