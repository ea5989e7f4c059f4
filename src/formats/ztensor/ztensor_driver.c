/*
 * ztensor_driver.c - the zTensor driver table: the one place that names both the reader hooks
 * (ztensor_open.c, ztensor_read.c, ztensor_decode.c, ztensor_validate.c) and the writer hooks
 * (ztensor_write.c). The registry (src/formats/registry.c) lists it.
 */
#include "ztensor_int.h"

static bool zt_w_dtype_ok(tbx_dtype dt) { return zt_dtype_by_tbx(dt) != NULL; }

const tbx_driver tbx_driver_ztensor = {
    .format = TBX_FORMAT_ZTENSOR,
    .name = "ztensor",
    .aliases = "zt",
    .extensions = ".zt",
    .caps = TBX_FCAP_COMPRESSION | TBX_FCAP_DIGESTS | TBX_FCAP_ALIGNMENT,
    .read_versions = 0x2u,  /* 1 (manifest "1.x.y") */
    .write_versions = 0x2u,
    .write_version = 1,
    .meta_types = ZT_META_TYPES,
    .w_dtype_ok = zt_w_dtype_ok,
    .probe = zt_probe,
    .open = zt_open,
    .read_component = zt_decode_component,
    .read_component_range = zt_read_range,
    .raw_pending = zt_raw_pending,
    .check_component = zt_check_component,
    .read_f32 = zt_read_f32_hook,
    .validate = zt_validate,
    .close = zt_close,
    .w_check_meta = zt_w_check_meta,
    .w_check_section = NULL,
    .w_check_tensor = zt_w_check_tensor,
    .w_check_quant = zt_w_check_quant,
    .w_layout = zt_w_layout,
    .w_data = zt_w_data,
    .w_tensor_done = zt_w_tensor_done,
    .w_finish = zt_w_finish,
    .w_free = zt_w_free,
};
