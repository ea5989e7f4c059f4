/*
 * registry.h - the table of format drivers (src/formats/registry.c): one row per format, in
 * probe order. The registry is the one place that names every driver; the drivers never see it,
 * and the façade (src/api/) reads it to detect a format, to open a writer for one, and to answer
 * what each format can do (tbx_format_caps_get).
 */
#ifndef TBX_REGISTRY_H
#define TBX_REGISTRY_H

#include "model.h"

/* The rows, each defined in its format's folder. */
extern const tbx_driver tbx_driver_safetensors;
extern const tbx_driver tbx_driver_gguf;
extern const tbx_driver tbx_driver_oinf;
extern const tbx_driver tbx_driver_mcf;
extern const tbx_driver tbx_driver_ztensor;
extern const tbx_driver tbx_driver_embd;
extern const tbx_driver tbx_driver_embd_legacy;

/* All drivers, in probe order; NULL-terminated. */
extern const tbx_driver *const tbx_drivers[];
/* The driver of a format value, NULL when this build has none. */
const tbx_driver *tbx_driver_for(tbx_format format);

#endif /* TBX_REGISTRY_H */
