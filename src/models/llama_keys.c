/*
 * llama_keys.c - llama.cpp's metadata key conventions over any opened model:
 * tbx_meta_find_arch (tensorbox.h), the "{arch}" key templates ("{arch}.context_length" is
 * "llama.context_length" in a file whose general.architecture is "llama"), as llama.cpp's
 * LLM_KV names are spelled and as GGUF files store them.
 *
 * This is the models layer's knowledge of llama.cpp, not the foundation's: core/meta.c keeps
 * the format-independent lookups (typed getters, string-array elements), this file reads them.
 */
#include "model.h"

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
