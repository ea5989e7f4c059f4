/*
 * options.c - the defaults of the public option structs (tbx_limits, tbx_open_options,
 * tbx_write_options): every field a caller leaves out, and every field a shorter (older)
 * caller's struct lacks, takes the value set here.
 */
#include "core.h"

void tbx_limits_default(tbx_limits *l) {
    if (!l) return;
    memset(l, 0, sizeof *l);
    l->struct_size = sizeof *l;
    l->max_tensors = 1000000;
    l->max_metadata_entries = 1000000;
    l->max_string_len = (uint64_t)1 << 30;
    l->max_array_len = (uint64_t)1 << 30;
    l->max_header_bytes = (uint64_t)1 << 30;
    l->max_tensor_bytes = (uint64_t)1 << 48;
    l->max_decode_window = (uint64_t)1 << 27;
    l->max_side_file_bytes = (uint64_t)1 << 28;
    l->meta_budget_per_byte = 1;
    l->meta_budget_base = (uint64_t)32 << 20;
    l->max_ndim = 64;
    l->max_depth = 32;
}

void tbx_open_options_init(tbx_open_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
}

void tbx_write_options_init(tbx_write_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
}
