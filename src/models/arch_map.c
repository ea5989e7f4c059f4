/*
 * arch_map.c - a Hugging Face tensor name read through an architecture row's name map
 * (arch.h): which entry it is, its layer and expert numbers and its suffix, and the llama.cpp
 * name an entry's template gives. Plain string work; the conversion (hf_gguf.c) turns the
 * matches into a plan.
 */
#include "arch.h"

#include <stdio.h>
#include <string.h>

/* Does `name` (nlen bytes) match pattern `pat` ('#' and '@': a decimal number, stored in *layer
 * and *expert; trailing '*': any rest)? */
static bool pmatch(const char *pat, const char *name, size_t nlen, long *layer, long *expert) {
    size_t i = 0;
    for (; *pat; pat++) {
        if (*pat == '*' && pat[1] == 0) return true;
        if (*pat == '#' || *pat == '@') {
            if (i >= nlen || name[i] < '0' || name[i] > '9') return false;
            long v = 0;
            while (i < nlen && name[i] >= '0' && name[i] <= '9' && v < 100000000)
                v = v * 10 + (name[i++] - '0');
            *(*pat == '#' ? layer : expert) = v;
            continue;
        }
        if (i >= nlen || name[i] != *pat) return false;
        i++;
    }
    return i == nlen;
}

int tbx_hf_map_(const hf_arch *a, const char *name, hf_match *out) {
    size_t nlen = strlen(name);
    for (int p = 0; p < 3 && a->prefixes[p]; p++) {
        size_t pl = strlen(a->prefixes[p]);
        if (nlen > pl && memcmp(name, a->prefixes[p], pl) == 0) { name += pl; nlen -= pl; break; }
    }
    long layer = -1, expert = -1;
    for (const char *const *s = a->skip; *s; s++)
        if (pmatch(*s, name, nlen, &layer, &expert)) return 0;
    const char *suffix = "";
    size_t base = nlen;
    if (nlen > 7 && strcmp(name + nlen - 7, ".weight") == 0) { suffix = ".weight"; base = nlen - 7; }
    else if (nlen > 5 && strcmp(name + nlen - 5, ".bias") == 0) { suffix = ".bias"; base = nlen - 5; }
    else if (nlen > 6 && strcmp(name + nlen - 6, ".gamma") == 0) { suffix = ".weight"; base = nlen - 6; }
    else if (nlen > 5 && strcmp(name + nlen - 5, ".beta") == 0) { suffix = ".bias"; base = nlen - 5; }
    for (const hf_tmap *m = a->tmap; m->hf; m++) {
        layer = expert = -1;
        if (!pmatch(m->hf, name, base, &layer, &expert)) continue;
        out->m = m;
        out->layer = layer;
        out->expert = expert;
        out->suffix = suffix;
        return 1;
    }
    return -1;
}

bool tbx_hf_gguf_name_(const char *gguf, long layer, const char *suffix, char *out, size_t cap) {
    size_t n = 0;
    for (const char *g = gguf; *g; g++) {
        if (*g == '#') {
            char num[24];
            int w = snprintf(num, sizeof num, "%ld", layer);
            if (w < 0 || n + (size_t)w >= cap) return false;
            memcpy(out + n, num, (size_t)w);
            n += (size_t)w;
        } else {
            if (n + 1 >= cap) return false;
            out[n++] = *g;
        }
    }
    size_t sl = strlen(suffix);
    if (n + sl + 1 > cap) return false;
    memcpy(out + n, suffix, sl + 1);
    return true;
}

/* ---- the way back: llama.cpp names -> entries (GGUF -> Hugging Face) ---------------------- */
int tbx_hf_unmap_(const hf_arch *a, const char *name, hf_unmatch *out) {
    size_t nlen = strlen(name), base = nlen;
    const char *suffix = "";
    if (nlen > 7 && strcmp(name + nlen - 7, ".weight") == 0) { suffix = ".weight"; base = nlen - 7; }
    else if (nlen > 5 && strcmp(name + nlen - 5, ".bias") == 0) { suffix = ".bias"; base = nlen - 5; }
    /* a template may carry its own suffix (gpt-oss's): then it matches the whole name */
    for (const hf_tmap *m = a->tmap; m->hf; m++) {
        long layer = -1, expert = -1;
        if (m->kind != HF_MAP_SPLIT && m->kind != HF_MAP_INTERLEAVE) {
            if (!m->gguf) continue;
            if (pmatch(m->gguf, name, base, &layer, &expert)) {
                *out = (hf_unmatch){m, -1, layer, suffix};
                return 1;
            }
            layer = expert = -1;
            if (*suffix && pmatch(m->gguf, name, nlen, &layer, &expert)) {
                *out = (hf_unmatch){m, -1, layer, ""};
                return 1;
            }
            continue;
        }
        for (int p = 0; m->parts && m->parts[p].gguf; p++) {
            layer = expert = -1;
            if (pmatch(m->parts[p].gguf, name, base, &layer, &expert)) {
                *out = (hf_unmatch){m, p, layer, suffix};
                return 1;
            }
            layer = expert = -1;
            if (*suffix && pmatch(m->parts[p].gguf, name, nlen, &layer, &expert)) {
                *out = (hf_unmatch){m, p, layer, ""};
                return 1;
            }
        }
    }
    return -1;
}

bool tbx_hf_fill_name_(const char *tpl, long layer, long expert, const char *suffix, char *out,
                       size_t cap) {
    size_t n = 0;
    for (const char *g = tpl; *g; g++) {
        if (*g == '#' || *g == '@') {
            char num[24];
            int w = snprintf(num, sizeof num, "%ld", *g == '#' ? layer : expert);
            if (w < 0 || n + (size_t)w >= cap) return false;
            memcpy(out + n, num, (size_t)w);
            n += (size_t)w;
        } else {
            if (n + 1 >= cap) return false;
            out[n++] = *g;
        }
    }
    size_t sl = strlen(suffix);
    if (n + sl + 1 > cap) return false;
    memcpy(out + n, suffix, sl + 1);
    return true;
}
