/*
 * registry.c - the driver table and everything read from it: format names and aliases,
 * detection by magic bytes, extensions, capabilities (tbx_format_caps_get), the drivers of
 * driver-specific dtypes and the public dtype lookups that include them (tbx_dtype_get,
 * tbx_dtype_from_name, tbx_dtype_nbytes[_shape]: the core table below them is
 * dtype.c), version queries. No format knowledge lives here: only the rows.
 *
 * Adding a format: its folder src/formats/<fmt>/ defines `const tbx_driver tbx_driver_<row>`
 * (the contract is struct tbx_driver in src/core/model.h) and its row name goes into
 * TBX_REGISTRY_ROWS (registry.h): the one place that names every driver, in probe order.
 */
#include "registry.h"
#include "plain.h" /* tbx_decode_f32_info */
#include "encode.h" /* tbx_quantizable, tbx_castable: the encoders' table */

#include <strings.h>

#define ROW_(row) &tbx_driver_##row,
const tbx_driver *const tbx_drivers[] = {TBX_REGISTRY_ROWS(ROW_) NULL};
#undef ROW_

const tbx_driver *tbx_driver_for(tbx_format format) {
    for (size_t i = 0; tbx_drivers[i]; i++)
        if (tbx_drivers[i]->format == format) return tbx_drivers[i];
    return NULL;
}

/* Does the space-separated list `list` hold `word` (case-insensitive)? */
static bool list_has(const char *list, const char *word) {
    size_t wl = strlen(word);
    if (!list || wl == 0) return false;
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n == wl && strncasecmp(p, word, n) == 0) return true;
        p += n;
    }
    return false;
}

const char *tbx_format_name(tbx_format format) {
    const tbx_driver *d = tbx_driver_for(format);
    return d && format != TBX_FORMAT_UNKNOWN ? d->name : "unknown";
}

tbx_format tbx_format_from_name(const char *name) {
    if (!name) return TBX_FORMAT_UNKNOWN;
    for (size_t i = 0; tbx_drivers[i]; i++)
        if (strcasecmp(name, tbx_drivers[i]->name) == 0 || list_has(tbx_drivers[i]->aliases, name))
            return tbx_drivers[i]->format;
    return TBX_FORMAT_UNKNOWN;
}

tbx_format tbx_detect_format(const void *head, size_t len, uint64_t file_size) {
    if (!head) return TBX_FORMAT_UNKNOWN;
    for (size_t i = 0; tbx_drivers[i]; i++)
        if (tbx_drivers[i]->probe && tbx_drivers[i]->probe(head, len, file_size))
            return tbx_drivers[i]->format;
    return TBX_FORMAT_UNKNOWN;
}

tbx_format tbx_format_from_path(const char *path) {
    if (!path) return TBX_FORMAT_UNKNOWN;
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return TBX_FORMAT_UNKNOWN;
    for (size_t i = 0; tbx_drivers[i]; i++)
        if (list_has(tbx_drivers[i]->extensions, dot)) return tbx_drivers[i]->format;
    return TBX_FORMAT_UNKNOWN;
}


size_t tbx_format_count(void) {
    size_t n = 0;
    while (tbx_drivers[n]) n++;
    return n;
}

/* Formats are listed in the order of their values (not the probe order). */
tbx_format tbx_format_at(size_t i) {
    size_t n = tbx_format_count();
    if (i >= n) return TBX_FORMAT_UNKNOWN;
    int last = 0;
    tbx_format f = TBX_FORMAT_UNKNOWN;
    for (size_t k = 0; k <= i; k++) {
        int best = -1;
        for (size_t j = 0; j < n; j++) {
            int v = (int)tbx_drivers[j]->format;
            if (v > last && (best < 0 || v < best)) best = v;
        }
        if (best < 0) return TBX_FORMAT_UNKNOWN;
        last = best;
        f = (tbx_format)best;
    }
    return f;
}

tbx_status tbx_format_caps_get(tbx_format format, tbx_format_caps *caps) {
    if (!caps) return TBX_E_INVALID_ARG;
    const tbx_driver *d = format == TBX_FORMAT_UNKNOWN ? NULL : tbx_driver_for(format);
    if (!d) return TBX_E_NOT_FOUND;
    tbx_format_caps c;
    memset(&c, 0, sizeof c);
    c.struct_size = caps->struct_size;
    c.format = d->format;
    c.name = d->name;
    c.aliases = d->aliases ? d->aliases : "";
    c.extensions = d->extensions ? d->extensions : "";
    c.flags = tbx_driver_caps(d);
    c.read_versions = d->read_versions;
    c.write_versions = d->write_versions;
    c.write_version = d->write_version;
    c.meta_types = d->meta_types;
    size_t n = tbx_struct_bytes(caps->struct_size, sizeof c);
    memcpy(caps, &c, n);
    return TBX_OK;
}

int tbx_dtype_quantizable(tbx_dtype dtype) {
    return tbx_dtype_get(dtype) && tbx_quantizable(dtype) ? 1 : 0;
}

int tbx_dtype_castable(tbx_dtype dtype) {
    return tbx_dtype_get(dtype) && tbx_castable(dtype) ? 1 : 0;
}

tbx_dtype tbx_quant_from_name(tbx_format format, const char *name) {
    if (!name || !*name) return TBX_DT_INVALID;
    tbx_dtype dt = tbx_dtype_from_name(name);
    if (dt != TBX_DT_INVALID && tbx_dtype_quantizable(dt)) return dt;
    const tbx_driver *d = format == TBX_FORMAT_UNKNOWN ? NULL : tbx_driver_for(format);
    size_t pl = d ? strlen(d->name) : 0;
    for (size_t k = 0; d && k < d->ndtypes; k++) {
        const char *n = d->dtypes[k].name;
        if (n && strncasecmp(n, d->name, pl) == 0 && n[pl] == '_' &&
            strcasecmp(n + pl + 1, name) == 0 && tbx_dtype_quantizable(d->dtypes[k].dtype))
            return d->dtypes[k].dtype;
    }
    return TBX_DT_INVALID;
}

const tbx_format_option *tbx_format_option_at(tbx_format format, size_t i) {
    const tbx_driver *d = format == TBX_FORMAT_UNKNOWN ? NULL : tbx_driver_for(format);
    if (!d || !d->w_layout || !d->w_options) return NULL;
    for (size_t k = 0; d->w_options[k].key; k++)
        if (k == i) return &d->w_options[k];
    return NULL;
}

int tbx_format_writes_dtype(tbx_format format, tbx_dtype dtype) {
    const tbx_driver *d = format == TBX_FORMAT_UNKNOWN ? NULL : tbx_driver_for(format);
    if (!d || !d->w_layout || !d->w_dtype_ok || !tbx_dtype_get(dtype)) return 0;
    return d->w_dtype_ok(dtype) ? 1 : 0;
}


/* ------------------------------------------------------------------------------------------ */
/* dtypes: the lookups of dtype.c over the rows (core table first, then the drivers' dtypes)  */
/* ------------------------------------------------------------------------------------------ */
const tbx_dtype_info *tbx_dtype_get(tbx_dtype dtype) { return tbx_dtype_get_in(tbx_drivers, dtype); }

tbx_dtype tbx_dtype_from_name(const char *name) {
    if (!name) return TBX_DT_INVALID;
    tbx_dtype dt = tbx_dtype_core_from_name(name);
    if (dt != TBX_DT_INVALID) return dt;
    for (size_t d = 0; tbx_drivers[d]; d++)
        for (size_t k = 0; k < tbx_drivers[d]->ndtypes; k++)
            if (tbx_dtype_name_eq(name, tbx_drivers[d]->dtypes[k].name))
                return tbx_drivers[d]->dtypes[k].dtype;
    return tbx_dtype_alias_from_name(name);
}

tbx_status tbx_dtype_nbytes(tbx_dtype dtype, uint64_t nelems, uint64_t *out) {
    const tbx_dtype_info *e = tbx_dtype_get(dtype);
    if (!e || !out) return TBX_E_INVALID_ARG;
    return tbx_dtype_info_nbytes(e, nelems, out);
}

tbx_status tbx_dtype_nbytes_shape(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                  uint64_t *out) {
    return tbx_dtype_nbytes_shape_in(tbx_drivers, dtype, shape, ndim, out);
}


const char *tbx_encoding_name(tbx_encoding encoding) {
    return tbx_encoding_name_in(tbx_drivers, encoding);
}

const char *tbx_version(void) { return TBX_VERSION_STRING; }
int tbx_version_number(void) { return TBX_VERSION_NUMBER; }

/* The public entry (tensorbox.h): the dtype looked up in every driver's table. */
tbx_status tbx_decode_f32(tbx_dtype dtype, const void *src, size_t src_len, uint64_t nelems,
                          float *dst) {
    return tbx_decode_f32_info(tbx_dtype_get(dtype), dtype, src, src_len, nelems, dst);
}
