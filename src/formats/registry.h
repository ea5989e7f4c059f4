/*
 * registry.h - the table of format drivers (src/formats/registry.c): one row per format, in
 * probe order. The registry is the one place that names every driver; the drivers never see it,
 * and the façade (src/api/) reads it to detect a format, to open a writer for one, and to answer
 * what each format can do (tbx_format_caps_get).
 */
#ifndef TBX_REGISTRY_H
#define TBX_REGISTRY_H

#include "model.h"

/* The rows, in probe order, each `const tbx_driver tbx_driver_<row>` defined in its format's
 * folder: adding a format is its folder plus its name here (the one list of drivers; the build
 * finds the folder by itself, cmake/layers.cmake). Probe order matters only for formats whose
 * magic is weak (safetensors has none): strong magics come first; embd before embd_legacy (both
 * start with "EMBD" 01 00 00 00); safetensors, the weakest probe, last. */
#define TBX_REGISTRY_ROWS(X)                                                                   \
    X(gguf) X(oinf) X(mcf) X(ztensor) X(embd) X(embd_legacy) X(npy) X(npz)                    \
    X(safetensors)

#define TBX_REGISTRY_EXTERN_(row) extern const tbx_driver tbx_driver_##row;
TBX_REGISTRY_ROWS(TBX_REGISTRY_EXTERN_)
#undef TBX_REGISTRY_EXTERN_

/* All drivers, in probe order; NULL-terminated. */
extern const tbx_driver *const tbx_drivers[];
/* The driver of a format value, NULL when this build has none. */
const tbx_driver *tbx_driver_for(tbx_format format);

#endif /* TBX_REGISTRY_H */
