/*
 * embd_driver.c - the EMBD driver tables: the one place that names both the reader hooks
 * (embd.c, embd_legacy.c) and the writer hooks (embd_write.c, embd_legacy_write.c). The
 * registry (src/core/registry.c) lists both rows: "embd" (the specification's layout) and
 * "embd-legacy" (the layout cpp_embedder's converter writes and its loader reads), both read
 * and written.
 */
#include "embd_int.h"

const tbx_driver tbx_driver_embd = {
    .format = TBX_FORMAT_EMBD,
    .name = "embd",
    .aliases = "weights",
    .extensions = ".weights",
    .read_versions = 0x2u,  /* major version 1 */
    .write_versions = 0x2u,
    .write_version = 1,
    .meta_types = EM_META_TYPES,
    .w_dtype_ok = em_w_dtype_ok,
    .w_dtype_in_check = true, /* em_w_check_tensor: EMBD's own message, naming its dtypes */
    .probe = em_probe,
    .open = em_open,
    .describe_key = "embd",
    .describe = em_describe,
    .validate = em_validate,
    .close = em_close,
    .raw_pending = em_raw_pending,
    .read_component = em_read_component,
    .check_component = em_check_component,
    .read_batch = em_read_batch,
    .w_check_meta = em_w_check_meta,
    .w_check_section = em_w_check_section,
    .w_check_tensor = em_w_check_tensor,
    .w_layout = em_w_layout,
    .w_data = em_w_data,
    .w_finish = em_w_finish,
    .w_free = em_w_free,
};

const tbx_driver tbx_driver_embd_legacy = {
    .format = TBX_FORMAT_EMBD_LEGACY,
    .name = "embd-legacy",
    .aliases = "embd_legacy",
    .extensions = NULL,
    .read_versions = 0x2u,  /* version 1 */
    .write_versions = 0x2u,
    .write_version = 1,
    .meta_types = 0,        /* no metadata */
    .w_dtype_ok = eml_w_dtype_ok,
    .w_dtype_in_check = true, /* eml_w_check_tensor: a BERT model's buffers left out by name */
    .probe = eml_probe,
    .open = eml_open,
    .describe_key = "embd", /* the vocabulary and its special tokens */
    .describe = em_describe,
    .close = eml_close,
    .w_check_meta = eml_w_check_meta,
    .w_check_section = em_w_check_section,
    .w_check_tensor = eml_w_check_tensor,
    .w_layout = eml_w_layout,
    .w_data = eml_w_data,
    .w_tensor_done = eml_w_tensor_done,
    .w_free = eml_w_free,
};
