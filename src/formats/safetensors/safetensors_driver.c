/*
 * safetensors_driver.c - the safetensors driver row: the reader hooks (safetensors.c), the set
 * hooks for a Hugging Face directory or sharded set (safetensors_set.c) and the writer hooks
 * (safetensors.c). The registry (src/core/registry.c) lists it.
 */
#include "safetensors_int.h"

const tbx_driver tbx_driver_safetensors = {
    .format = TBX_FORMAT_SAFETENSORS,
    .name = "safetensors",
    .extensions = ".safetensors",
    .read_versions = 1u,  /* unversioned */
    .write_versions = 1u,
    .meta_types = TBX_VBIT(TBX_V_STRING),
    .w_dtype_ok = st_w_dtype_ok,
    .probe = st_probe,
    .open = st_open,
    .claims_path = st_claims_path,
    .open_path = st_open_path,
    .read_component = NULL,
    .validate = NULL,
    .close = st_close,
    .w_check_meta = st_w_check_meta,
    .w_check_tensor = st_w_check_tensor,
    .w_layout = st_w_layout,
    .w_data = NULL,
    .w_tensor_done = NULL,
    .w_finish = NULL,
    .w_free = NULL,
};
