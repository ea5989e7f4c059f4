/*
 * meta.c - convenience lookups over a file's metadata: typed getters, GGUF-style "{arch}" key
 * templates and string-array elements (tokenizer vocabularies). Everything here is a thin layer
 * over tbx_meta_find() and the value getters.
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

const tbx_value *tbx_meta_find_arch(const tbx_file *f, const char *tmpl) {
    static const char token[] = "{arch}";
    const size_t tl = sizeof token - 1;
    if (!f || !tmpl) return NULL;
    if (!strstr(tmpl, token)) return tbx_meta_find(f, tmpl);
    size_t alen;
    const char *arch = tbx_meta_get_str(f, "general.architecture", &alen);
    if (!arch || memchr(arch, 0, alen)) return NULL;
    char key[1024];
    size_t n = 0;
    for (const char *p = tmpl; *p;) {
        const char *piece = p;
        size_t plen;
        if (strncmp(p, token, tl) == 0) { piece = arch; plen = alen; p += tl; }
        else { plen = 1; p++; }
        if (plen >= sizeof key - n) return NULL;
        memcpy(key + n, piece, plen);
        n += plen;
    }
    key[n] = 0;
    return tbx_meta_find(f, key);
}

const char *tbx_meta_array_str(const tbx_file *f, const char *key, uint64_t i, size_t *len) {
    if (len) *len = 0;
    const tbx_value *arr = tbx_meta_find(f, key);
    return tbx_value_str_at(arr, i, len);
}
