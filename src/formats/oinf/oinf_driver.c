/*
 * oinf_driver.c - the OINF driver table: the one place that names both the reader hooks
 * (oinf.c) and the writer hooks (oinf_write.c). The registry (src/core/registry.c) lists it.
 */
#include "oinf_int.h"

const tbx_driver tbx_driver_oinf = {
    .format = TBX_FORMAT_OINF,
    .name = "oinf",
    .extensions = ".oinf",
    .caps = TBX_FCAP_NO_DATA | TBX_FCAP_ALIGNMENT,
    .read_versions = 0x6u,  /* 1, 2 */
    .write_versions = 0x6u,
    .write_version = 1,
    .meta_types = OI_META_TYPES,
    .w_dtype_ok = oi_w_dtype_ok,
    .w_add_sizevar = tbx_oinf_writer_add_sizevar,
    .probe = oi_probe,
    .open = oi_open,
    .read_component = NULL,
    .validate = oi_validate,
    .close = oi_close,
    .w_check_meta = oi_w_check_meta,
    .w_check_section = NULL,
    .w_check_tensor = oi_w_check_tensor,
    .w_check_quant = oi_w_check_quant,
    .w_layout = oi_w_layout,
    .w_data = NULL,
    .w_tensor_done = NULL,
    .w_finish = NULL,
    .w_free = oi_w_free,
};
