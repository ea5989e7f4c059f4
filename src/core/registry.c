/*
 * registry.c - format names, format detection by magic bytes, the driver table, version queries.
 *
 * Adding a format: write src/formats/<fmt>.c defining `const tbx_driver tbx_driver_<fmt>`,
 * declare it in internal.h and list it in tbx_drivers[] below. Probe order matters only for
 * formats whose magic is weak (safetensors has none): strong magics come first.
 */
#include "internal.h"

#include <strings.h>

const tbx_driver *const tbx_drivers[] = {
    &tbx_driver_gguf,
    &tbx_driver_oinf,
    &tbx_driver_ztensor,
    &tbx_driver_safetensors, /* weakest probe (no magic): keep last */
    NULL,
};

const tbx_driver *tbx_driver_for(tbx_format format) {
    for (size_t i = 0; tbx_drivers[i]; i++)
        if (tbx_drivers[i]->format == format) return tbx_drivers[i];
    return NULL;
}

static const char *const format_names[] = {
    "unknown", "safetensors", "gguf", "ztensor", "oinf", "mcf", "embd",
};

const char *tbx_format_name(tbx_format format) {
    if ((unsigned)format < sizeof format_names / sizeof format_names[0]) return format_names[format];
    return "unknown";
}

tbx_format tbx_format_from_name(const char *name) {
    if (!name) return TBX_FORMAT_UNKNOWN;
    for (unsigned i = 1; i < sizeof format_names / sizeof format_names[0]; i++)
        if (strcasecmp(name, format_names[i]) == 0) return (tbx_format)i;
    if (strcasecmp(name, "zt") == 0) return TBX_FORMAT_ZTENSOR;
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
    static const struct { const char *ext; tbx_format f; } exts[] = {
        { ".safetensors", TBX_FORMAT_SAFETENSORS }, { ".gguf", TBX_FORMAT_GGUF },
        { ".zt", TBX_FORMAT_ZTENSOR }, { ".oinf", TBX_FORMAT_OINF }, { ".mcf", TBX_FORMAT_MCF },
        { ".weights", TBX_FORMAT_EMBD },
    };
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcasecmp(dot, exts[i].ext) == 0) return exts[i].f;
    return TBX_FORMAT_UNKNOWN;
}

const char *tbx_layout_name(tbx_layout layout) {
    switch (layout) {
    case TBX_LAYOUT_DENSE: return "dense";
    case TBX_LAYOUT_SPARSE_CSR: return "sparse_csr";
    case TBX_LAYOUT_SPARSE_COO: return "sparse_coo";
    case TBX_LAYOUT_QUANT_GROUP: return "quantized_group";
    }
    return "unknown";
}

const char *tbx_version(void) { return TBX_VERSION_STRING; }
int tbx_version_number(void) { return TBX_VERSION_NUMBER; }
