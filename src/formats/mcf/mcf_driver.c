/*
 * mcf_driver.c - the MCF driver table: the one place that names both the reader hooks (mcf.c)
 * and the writer hooks (mcf_write.c). The registry (src/core/registry.c) lists it.
 */
#include "mcf_int.h"

const tbx_driver tbx_driver_mcf = {
    .format = TBX_FORMAT_MCF,
    .name = "mcf",
    .extensions = ".mcf",
    .caps = TBX_FCAP_ALIGNMENT,
    .read_versions = 0x2u,  /* major 1 */
    .write_versions = 0x2u,
    .write_version = 1,
    .meta_types = MCF_META_TYPES,
    .w_dtype_ok = mcf_w_dtype_ok,
    .dtypes = mcf_dtypes,
    .ndtypes = sizeof mcf_dtypes / sizeof mcf_dtypes[0],
    .dtype_nbytes = mcf_dtype_nbytes,
    .probe = mcf_probe,
    .open = mcf_open,
    .read_component = mcf_read_component,
    .raw_pending = mcf_raw_pending,
    .check_component = mcf_check_component,
    .read_f32 = mcf_read_f32,
    .describe_key = "mcf_directory",
    .describe = mcf_describe,
    .validate = mcf_validate,
    .close = mcf_close,
    .w_options = mcf_w_options,
    .w_check_options = mcf_w_check_options,
    .w_check_meta = mcf_w_check_meta,
    .w_check_section = mcf_w_check_section,
    .w_check_tensor = mcf_w_check_tensor,
    .w_check_quant = mcf_w_check_quant,
    .w_layout = mcf_w_layout,
    .w_data = mcf_w_data,
    .w_tensor_done = mcf_w_tensor_done,
    .w_finish = mcf_w_finish,
    .w_free = mcf_w_free,
};
