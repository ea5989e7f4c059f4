/*
 * tensorbox/mcf.h - experimental API: MCF extras of libtensorbox.
 *
 *   #define TBX_EXPERIMENTAL
 *   #include <tensorbox/mcf.h>
 *
 * EXPERIMENTAL: the functions and types declared here are exported by libtensorbox but are NOT
 * part of the stable API of tensorbox.h. They may change or disappear in any minor version
 * (0.x -> 0.y); a program that uses them must be rebuilt (and perhaps adapted) against the
 * exact tensorbox version it runs with. Defining TBX_EXPERIMENTAL before the #include is the
 * caller's acknowledgement; without it this header refuses to compile.
 *
 * What is here: the MCF section directory as the file has it (every entry, including the
 * sections the common model represents otherwise: ModelInfo as metadata "mcf.*", TensorIndex
 * and TensorData as tensors, QuantInfo as each tensor's tbx_quant_info). The HF sections
 * (config.json, tokenizer.json, ...) are also ordinary sections (tbx_section_*), named by their
 * file name. docs/formats/mcf.md describes the format.
 */
#ifndef TENSORBOX_MCF_H
#define TENSORBOX_MCF_H

#ifndef TBX_EXPERIMENTAL
#error "tensorbox/mcf.h is experimental API: #define TBX_EXPERIMENTAL before including it"
#endif

#include "../tensorbox.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of an MCF section directory, in directory order. */
typedef struct tbx_mcf_section {
    uint32_t type;       /* 0x0001 ModelInfo, 0x0002 QuantInfo, 0x0003 TensorIndex,
                          * 0x0004 TensorData, 0x0100..0x0105 HF files, others unknown */
    uint32_t version;    /* the directory entry's version field */
    uint64_t offset;     /* absolute */
    uint64_t size;       /* bytes (unpadded) */
    const char *name;    /* "ModelInfo", "config.json", ... or "unknown"; static storage */
} tbx_mcf_section;

/* Number of directory entries of a handle opened as MCF (0 for any other handle). */
TBX_API uint64_t tbx_mcf_section_count(const tbx_file *f);
/* Entry i of the directory. TBX_E_INVALID_ARG for another format or i out of range. */
TBX_API tbx_status tbx_mcf_section_get(const tbx_file *f, uint64_t i, tbx_mcf_section *out);

#ifdef __cplusplus
}
#endif

#endif /* TENSORBOX_MCF_H */
