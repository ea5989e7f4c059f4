/*
 * model_get.c - the public getters of an open file's model (include/tensorbox.h: tbx_file_*,
 * tbx_meta_*, tbx_sizevar_*, tbx_tensor_info_get, tbx_tensor_find, tbx_component_info_get,
 * tbx_section_count / _info_get): what a driver put into the model, read back without touching
 * the file. Reading bytes is src/access/.
 */
#include "model.h"

#include <inttypes.h>
#include <stdio.h>

tbx_format tbx_file_format(const tbx_file *f) { return f ? f->format : TBX_FORMAT_UNKNOWN; }
uint32_t tbx_file_version(const tbx_file *f) { return f ? f->version : 0; }
uint64_t tbx_file_size(const tbx_file *f) { return f ? f->src.size : 0; }

uint64_t tbx_file_part_count(const tbx_file *f) { return f ? 1 + (uint64_t)f->nextra_src : 0; }

const char *tbx_file_part_path(const tbx_file *f, uint64_t i, uint64_t *size) {
    if (size) *size = 0;
    if (!f || i > f->nextra_src) return NULL;
    const tbx_source *s = tbx_file_source(f, (uint32_t)i);
    if (size && s) *size = s->size;
    if (f->part_names) return f->part_names[i];
    return i == 0 ? f->path : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata                                                                                    */
/* ------------------------------------------------------------------------------------------ */

uint64_t tbx_meta_count(const tbx_file *f) { return f ? f->nmeta : 0; }

const char *tbx_meta_key(const tbx_file *f, uint64_t i, size_t *len) {
    if (!f || i >= f->nmeta) { if (len) *len = 0; return NULL; }
    if (len) *len = f->meta[i].key_len;
    return f->meta[i].key;
}

const tbx_value *tbx_meta_value(const tbx_file *f, uint64_t i) {
    return (f && i < f->nmeta) ? f->meta[i].value : NULL;
}

const tbx_value *tbx_meta_find(const tbx_file *f, const char *key) {
    uint64_t i;
    if (!f || !key || !tbx_names_find(&f->meta_names, key, strlen(key), &i)) return NULL;
    return f->meta[i].value;
}

/* ------------------------------------------------------------------------------------------ */
/* Size variables: the model's table (tbx_file_add_sizevar), in the order the driver added them. */
/* ------------------------------------------------------------------------------------------ */
uint64_t tbx_sizevar_count(const tbx_file *f) { return f ? f->nsizevars : 0; }

tbx_status tbx_sizevar_get(const tbx_file *f, uint64_t i, const char **name, size_t *name_len,
                           uint64_t *value) {
    if (!f || i >= f->nsizevars) return TBX_E_INVALID_ARG;
    const tbx_sizevar *v = &f->sizevars[i];
    if (name) *name = v->name;
    if (name_len) *name_len = v->name_len;
    if (value) *value = v->value;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

uint64_t tbx_tensor_count(const tbx_file *f) { return f ? f->ntensors : 0; }

tbx_status tbx_tensor_info_get(const tbx_file *f, uint64_t i, tbx_tensor_info *out) {
    if (!f || !out || i >= f->ntensors) return TBX_E_INVALID_ARG;
    const tbx_tensor *t = &f->tensors[i];
    tbx_tensor_info tmp, *info = &tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.struct_size = out->struct_size;
    info->name = t->name;
    info->name_len = t->name_len;
    info->dtype = t->dtype;
    info->ndim = t->ndim;
    info->shape = t->ndim ? t->shape : NULL;
    info->nelems = t->nelems;
    info->layout = t->layout;
    info->ncomponents = t->ncomp;
    info->offset = t->ncomp ? t->comp[0].offset : 0;
    uint64_t total = 0;
    for (uint32_t c = 0; c < t->ncomp; c++) total += t->comp[c].stored_bytes; /* checked at open */
    info->nbytes = total;
    info->flags = t->unreadable ? TBX_TENSOR_UNREADABLE : 0;
    memcpy(out, &tmp, tbx_struct_bytes(out->struct_size, sizeof tmp));
    return TBX_OK;
}

tbx_status tbx_tensor_find(const tbx_file *f, const char *name, uint64_t *index) {
    if (!f || !name) return TBX_E_INVALID_ARG;
    uint64_t i;
    if (!tbx_names_find(&f->tensor_names, name, strlen(name), &i)) return TBX_E_NOT_FOUND;
    if (index) *index = i;
    return TBX_OK;
}

tbx_status tbx_component_info_get(const tbx_file *f, uint64_t i, uint32_t c,
                                  tbx_component_info *out) {
    if (!f || !out || i >= f->ntensors || c >= f->tensors[i].ncomp) return TBX_E_INVALID_ARG;
    const tbx_component *k = &f->tensors[i].comp[c];
    tbx_component_info tmp, *info = &tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.struct_size = out->struct_size;
    info->name = k->name;
    info->dtype = k->dtype;
    info->nelems = k->nelems;
    info->offset = k->offset;
    info->stored_bytes = k->stored_bytes;
    info->nbytes = k->nbytes;
    info->encoding = k->encoding;
    info->digest = k->digest;
    memcpy(out, &tmp, tbx_struct_bytes(out->struct_size, sizeof tmp));
    return TBX_OK;
}

uint64_t tbx_section_count(const tbx_file *f) { return f ? f->nsections : 0; }

tbx_status tbx_section_info_get(const tbx_file *f, uint64_t i, tbx_section_info *out) {
    if (!f || !out || i >= f->nsections) return TBX_E_INVALID_ARG;
    tbx_section_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = out->struct_size;
    info.name = f->sections[i].name;
    info.type = f->sections[i].type;
    info.offset = f->sections[i].offset;
    info.size = f->sections[i].size;
    memcpy(out, &info, tbx_struct_bytes(out->struct_size, sizeof info));
    return TBX_OK;
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

const char *tbx_encoding_name_in(const tbx_driver *const *drivers, tbx_encoding encoding) {
    switch (encoding) {
    case TBX_ENC_RAW: return "raw";
    case TBX_ENC_ZSTD: return "zstd";
    }
    for (size_t i = 0; drivers && drivers[i]; i++)
        for (const tbx_encoding_entry *e = drivers[i]->encodings; e && e->name; e++)
            if (e->encoding == encoding) return e->name;
    return "unknown";
}

size_t tbx_versions_text(uint32_t mask, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (uint32_t v = 0; v < 32; v++) {
        if (!(mask >> v & 1u)) continue;
        int k = snprintf(buf + n, cap - n, "%s%" PRIu32 "%s", n ? ", " : "", v,
                         v == 0 ? " (unversioned)" : "");
        if (k < 0 || (size_t)k >= cap - n) break;
        n += (size_t)k;
    }
    if (n == 0 && cap) n = (size_t)snprintf(buf, cap, "none");
    return n < cap ? n : cap ? cap - 1 : 0;
}

bool tbx_driver_reads_version(const tbx_driver *d, uint32_t v) {
    return v < 32 && (d->read_versions >> v & 1u);
}

bool tbx_driver_writes_version(const tbx_driver *d, uint32_t v) {
    return v < 32 && (d->write_versions >> v & 1u);
}

uint32_t tbx_driver_caps(const tbx_driver *d) {
    uint32_t c = d->caps;
    if (d->open) c |= TBX_FCAP_READ;
    if (d->w_layout) c |= TBX_FCAP_WRITE;
    if (d->w_check_section) c |= TBX_FCAP_SECTIONS;
    if (d->w_add_sizevar) c |= TBX_FCAP_SIZEVARS;
    return c;
}
