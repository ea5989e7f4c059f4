/*
 * safetensors_common.c - what the safetensors reader (safetensors.c) and its set reader
 * (safetensors_set.c) share: walkers over JSON text that jansson (or the reader's own checks)
 * already accepted. Every walk is bounds-checked and answers ST_JS_NONE on anything unexpected.
 */
#include "safetensors_int.h"

size_t st_js_ws(const char *p, size_t n, size_t i) {
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
    return i;
}

/* i at '"': returns the index after the closing quote, or ST_JS_NONE. */
size_t st_js_skip_string(const char *p, size_t n, size_t i) {
    if (i >= n || p[i] != '"') return ST_JS_NONE;
    for (i++; i < n; i++) {
        if (p[i] == '\\') i++;
        else if (p[i] == '"') return i + 1;
    }
    return ST_JS_NONE;
}

/* i at the first byte of a value: returns the index after it, or ST_JS_NONE. */
size_t st_js_skip_value(const char *p, size_t n, size_t i) {
    if (i >= n) return ST_JS_NONE;
    if (p[i] == '"') return st_js_skip_string(p, n, i);
    if (p[i] == '{' || p[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            char c = p[i];
            if (c == '"') {
                i = st_js_skip_string(p, n, i);
                if (i == ST_JS_NONE) return ST_JS_NONE;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0) return i + 1;
            }
            i++;
        }
        return ST_JS_NONE;
    }
    while (i < n && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != ' ' && p[i] != '\t' &&
           p[i] != '\n' && p[i] != '\r')
        i++;
    return i;
}
