/*
 * gguf_driver.c - the GGUF driver tables: the one place that names both the reader hooks
 * (gguf.c) and the writer hooks (gguf_write.c). The registry (src/formats/registry.c) lists
 * tbx_driver_gguf; read_component serves only the components of a big-endian file (marked
 * transformed, tbx_component.xform, by gguf_open): little-endian ones are read from the source.
 */
#include "gguf_int.h"

#define GGUF_META_TYPES                                                                            \
    (TBX_VBIT(TBX_V_BOOL) | TBX_VBIT(TBX_V_U8) | TBX_VBIT(TBX_V_I8) | TBX_VBIT(TBX_V_U16) |     \
     TBX_VBIT(TBX_V_I16) | TBX_VBIT(TBX_V_U32) | TBX_VBIT(TBX_V_I32) | TBX_VBIT(TBX_V_U64) |    \
     TBX_VBIT(TBX_V_I64) | TBX_VBIT(TBX_V_F32) | TBX_VBIT(TBX_V_F64) | TBX_VBIT(TBX_V_STRING) | \
     TBX_VBIT(TBX_V_ARRAY))

/* The row (NULL hooks: zero-initialised). */
#define GGUF_DRIVER_COMMON                                                                      \
    .format = TBX_FORMAT_GGUF, .name = "gguf", .extensions = ".gguf",                         \
    .read_versions = 0xEu,  /* 1, 2, 3 */                                                     \
    .write_versions = 0xCu, /* 2, 3 */                                                        \
    .write_version = 3, .caps = TBX_FCAP_ALIGNMENT,                                            \
    .meta_types = GGUF_META_TYPES, .w_dtype_ok = gguf_w_dtype_ok,                              \
    .probe = gguf_probe, .open = gguf_open, .read_component = gguf_read_be,                   \
    .validate = gguf_validate, .close = gguf_close,                                            \
    .w_check_meta = gguf_w_check_meta, .w_check_tensor = gguf_w_check_tensor,                \
    .w_layout = gguf_w_layout, .w_finish = gguf_w_finish,                                      \
    .w_options = gguf_w_options

const tbx_driver tbx_driver_gguf = {
    GGUF_DRIVER_COMMON,
};

