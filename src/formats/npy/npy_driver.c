/*
 * npy_driver.c - the NumPy driver rows: "npy" (one array, npy.c / npy_write.c) and "npz" (a zip
 * archive of .npy members, npz.c / npz_write.c), the one file naming both halves. Two rows, not
 * one: the two are different containers (a .npy file is the array; an .npz file is a zip), with
 * their own magic, capabilities (npz compresses, npy holds one array) and versions (npy 1.0, 2.0,
 * 3.0; npz is unversioned, its members are .npy 1.0..3.0); tbx_format_from_path tells them apart
 * by extension and tbx_detect_format by magic. The registry's list (src/formats/registry.h)
 * names both.
 *
 * Their format values and npz's encoding are the rows' own (npy_int.h: tensorbox.h names
 * none of them). A big-endian or Fortran-order array's component is marked transformed
 * (tbx_component.xform) by the reader, so it alone reads through read_component, which swaps
 * and transposes.
 */
#include "npy_int.h"

#define NPY_READ_HOOKS                                                                          \
    .read_component = npy_read_component, .read_component_range = npy_read_component_range,     \
    .raw_pending = npy_raw_pending, .check_component = npy_check_component, .close = npy_close

static const tbx_encoding_entry npz_encodings[] = {{NPZ_ENC_DEFLATE, "deflate"}, {0, NULL}};

const tbx_driver tbx_driver_npy = {
    .format = NPY_FORMAT, .name = "npy", .extensions = ".npy",
    .read_versions = 0xEu, /* 1.0, 2.0, 3.0 */
    .write_versions = 0xEu, .write_version = 1, .meta_types = 0,
    .w_dtype_ok = npy_w_dtype_ok, .probe = npy_probe, .open = npy_open, NPY_READ_HOOKS,
    .w_check_meta = npy_w_check_meta, .w_check_tensor = npy_w_check_tensor,
    .w_layout = npy_w_layout,
};

const tbx_driver tbx_driver_npz = {
    .format = NPZ_FORMAT, .name = "npz", .extensions = ".npz",
    .caps = TBX_FCAP_COMPRESSION, .read_versions = 1u, /* unversioned */
    .write_versions = 1u, .meta_types = 0, .w_dtype_ok = npy_w_dtype_ok, .probe = npz_probe,
    .open = npz_open, NPY_READ_HOOKS, .encodings = npz_encodings,
    .w_check_options = npz_w_check_options, .w_check_meta = npy_w_check_meta,
    .w_check_tensor = npz_w_check_tensor, .w_layout = npz_w_layout, .w_data = npz_w_data,
    .w_finish = npz_w_finish, .w_free = npz_w_free,
};
