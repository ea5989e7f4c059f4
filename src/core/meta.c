/*
 * meta.c - convenience lookups over a file's metadata, the same for every format: typed getters
 * and string-array elements (tokenizer vocabularies). Everything here is a thin layer over
 * tbx_meta_find() and the value getters. llama.cpp's "{arch}" key templates
 * (tbx_meta_find_arch) are the models layer's (src/models/llama_keys.c).
 */
#include "model.h"

tbx_status tbx_meta_get_u64(const tbx_file *f, const char *key, uint64_t *out) {
    const tbx_value *v = tbx_meta_find(f, key);
    return v ? tbx_value_get_u64(v, out) : TBX_E_NOT_FOUND;
}

tbx_status tbx_meta_get_i64(const tbx_file *f, const char *key, int64_t *out) {
    const tbx_value *v = tbx_meta_find(f, key);
    return v ? tbx_value_get_i64(v, out) : TBX_E_NOT_FOUND;
}

tbx_status tbx_meta_get_f64(const tbx_file *f, const char *key, double *out) {
    const tbx_value *v = tbx_meta_find(f, key);
    return v ? tbx_value_get_f64(v, out) : TBX_E_NOT_FOUND;
}

const char *tbx_meta_get_str(const tbx_file *f, const char *key, size_t *len) {
    const tbx_value *v = tbx_meta_find(f, key);
    if (!v || v->type != TBX_V_STRING) {
        if (len) *len = 0;
        return NULL;
    }
    return tbx_value_get_str(v, len);
}

const char *tbx_meta_array_str(const tbx_file *f, const char *key, uint64_t i, size_t *len) {
    if (len) *len = 0;
    const tbx_value *arr = tbx_meta_find(f, key);
    return tbx_value_str_at(arr, i, len);
}
