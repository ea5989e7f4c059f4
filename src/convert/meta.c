/*
 * meta.c - what a conversion copies through the writer API as it is: the input's metadata
 * (lent to the writer; refused entries stringified or dropped only when the options allow
 * it), the caller's own entries, size variables and sections. Tensors are the plan's
 * (engine.c).
 */
#include "convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Rendering a value as text (for TBX_CONVERT_STRINGIFY_META): strings stay as they are,       */
/* everything else becomes compact JSON.                                                       */
/* ------------------------------------------------------------------------------------------ */
/* (a tbx_membuf: the text without its NUL until sb_take_string) */
static void sb_put(tbx_membuf *b, const char *s, size_t n) { tbx_membuf_put(b, s, n); }
static void sb_str(tbx_membuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_string(tbx_membuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; sb_put(b, e, 2); }
        else if (c < 0x20) { snprintf(e, sizeof e, "\\u%04x", c); sb_str(b, e); }
        else sb_put(b, (const char *)&s[i], 1);
    }
    sb_put(b, "\"", 1);
}

static void sb_value(tbx_membuf *b, const tbx_value *v, int depth) {
    char tmp[64];
    if (depth > 64) { sb_str(b, "null"); return; }
    switch (v->type) {
    case TBX_V_NULL: sb_str(b, "null"); break;
    case TBX_V_BOOL: sb_str(b, v->v.u ? "true" : "false"); break;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64:
        snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v->v.u); sb_str(b, tmp); break;
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->v.i); sb_str(b, tmp); break;
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64:
        if (isnan(v->v.f)) sb_str(b, "\"nan\"");
        else if (isinf(v->v.f)) sb_str(b, v->v.f > 0 ? "\"inf\"" : "\"-inf\"");
        else {
            /* shortest representation that reads back to the same double */
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(tmp, sizeof tmp, "%.*g", prec, v->v.f);
                if (strtod(tmp, NULL) == v->v.f) break;
            }
            sb_str(b, tmp);
        }
        break;
    case TBX_V_STRING: sb_json_string(b, v->v.s.p, v->v.s.n); break;
    case TBX_V_BYTES:
        sb_put(b, "\"", 1);
        for (size_t i = 0; i < v->v.s.n; i++) {
            snprintf(tmp, sizeof tmp, "%02x", (unsigned char)v->v.s.p[i]);
            sb_str(b, tmp);
        }
        sb_put(b, "\"", 1);
        break;
    case TBX_V_ARRAY:
        sb_put(b, "[", 1);
        for (uint64_t i = 0; i < v->v.a.n; i++) {
            if (i) sb_put(b, ",", 1);
            if (v->v.a.soff) { /* compact strings: read in place */
                size_t len;
                const char *sp = tbx_value_str_at(v, i, &len);
                sb_json_string(b, sp, len);
                continue;
            }
            tbx_value pe; /* packed scalars are rendered in place, never materialised */
            const tbx_value *e = tbx_val_packed_get(v, (size_t)i, &pe) ? &pe : tbx_value_at(v, i);
            if (e) sb_value(b, e, depth + 1);
            else b->oom = true;
        }
        sb_put(b, "]", 1);
        break;
    case TBX_V_MAP:
        sb_put(b, "{", 1);
        for (uint64_t i = 0; i < v->v.a.n; i++) {
            if (i) sb_put(b, ",", 1);
            sb_json_string(b, v->v.a.keys[i], v->v.a.key_lens[i]);
            sb_put(b, ":", 1);
            sb_value(b, v->v.a.items[i], depth + 1);
        }
        sb_put(b, "}", 1);
        break;
    case TBX_V_BITSET:
        sb_put(b, "[", 1);
        for (uint64_t i = 0; i < v->v.nd.count; i++)
            sb_str(b, i ? ((v->v.nd.data[i / 8] >> (i % 8)) & 1 ? ",1" : ",0")
                        : ((v->v.nd.data[0] & 1) ? "1" : "0"));
        sb_put(b, "]", 1);
        break;
    case TBX_V_NDARRAY: {
        /* flat list of decoded elements (shape is lost in the string form) */
        const tbx_dtype_info *di = tbx_dtype_get(v->v.nd.dtype);
        sb_put(b, "[", 1);
        for (uint64_t i = 0; di && i < v->v.nd.count; i++) {
            float x;
            if (i) sb_put(b, ",", 1);
            if (di->flags & TBX_DTF_INT && !(di->flags & TBX_DTF_PACKED) && di->bits == 64) {
                uint64_t u; memcpy(&u, v->v.nd.data + i * 8, 8);
                if (di->flags & TBX_DTF_SIGNED) snprintf(tmp, sizeof tmp, "%lld", (long long)u);
                else snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)u);
                sb_str(b, tmp);
                continue;
            }
            if (di->flags & TBX_DTF_PACKED) {
                /* decode the whole prefix is wasteful; decode this element's group */
                x = NAN;
                float grp[8];
                uint64_t g = i - i % 8;
                uint64_t cnt = v->v.nd.count - g < 8 ? v->v.nd.count - g : 8;
                if (tbx_decode_f32(v->v.nd.dtype, v->v.nd.data + g * di->bits / 8,
                                   v->v.nd.nbytes - g * di->bits / 8, cnt, grp) == TBX_OK)
                    x = grp[i - g];
            } else if (tbx_decode_f32(v->v.nd.dtype, v->v.nd.data + i * (di->bits / 8),
                                      di->bits / 8, 1, &x) != TBX_OK) {
                x = NAN;
            }
            tbx_value tv = { .type = TBX_V_F64, .v.f = x };
            sb_value(b, &tv, depth + 1);
        }
        sb_put(b, "]", 1);
        break;
    }
    }
}

/* ------------------------------------------------------------------------------------------ */

/* The target cannot store an item (metadata entry, size variable, section): its type has no
 * equivalent (UNSUPPORTED), storing it would lose information (LOSSY), or its text breaks the
 * target's rules, e.g. OINF's [A-Za-z0-9._-] strings (FORMAT). Such refusals may be overridden
 * only by the explicit drop/stringify options. */
static bool refusal(tbx_status st) {
    return st == TBX_E_UNSUPPORTED || st == TBX_E_LOSSY || st == TBX_E_FORMAT;
}

/* Values made during the conversion (stringified metadata), lent to the writer and freed after
 * it finished or aborted. */

void tbx_convert_kept_free(tbx_file *in, tbx_kept_values *k) {
    for (size_t i = 0; i < k->n; i++) tbx_val_free(k->v[i]);
    tbx_free(&in->al, k->v, k->cap * sizeof *k->v);
}

/* The text of b as a STRING value owning b's buffer (no copy); b is consumed. */
static tbx_value *sb_take_string(const tbx_alloc *al, tbx_membuf *b) {
    tbx_membuf_put(b, NULL, 1); /* the NUL */
    if (b->oom) { tbx_free(al, b->p, b->cap); return NULL; }
    uint8_t *p = b->cap == b->n ? b->p : tbx_realloc(al, b->p, b->cap, b->n);
    if (!p) { tbx_free(al, b->p, b->cap); return NULL; }
    tbx_value *s = tbx_val_new(al, TBX_V_STRING);
    if (!s) { tbx_free(al, p, b->n); return NULL; }
    s->v.s.p = (char *)p;
    s->v.s.n = b->n - 1;
    return s;
}

/* Is key one of the caller's own entries (tbx_convert_options.meta, a MAP)? */
static bool given_meta(const tbx_value *m, const char *key, size_t key_len) {
    for (uint64_t i = 0, n = m ? tbx_value_len(m) : 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        if (k && kl == key_len && memcmp(k, key, kl) == 0) return true;
    }
    return false;
}

/* The caller's entries (tbx_convert_options.meta), after the input's: copied, typed as given. */
static tbx_status add_given_meta(tbx_writer *w, const tbx_value *m, tbx_error *err) {
    for (uint64_t i = 0, n = m ? tbx_value_len(m) : 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        tbx_status st = tbx_writer_add_meta(w, k, kl, tbx_value_at(m, i), err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* The text --stringify-meta makes of a value (sb_value): a STRING value owning its buffer, or
 * NULL when out of memory. */
static tbx_value *stringify(tbx_file *in, const tbx_value *v) {
    tbx_membuf b = { &in->al, NULL, 0, 0, false };
    sb_value(&b, v, 0);
    return sb_take_string(&in->al, &b);
}

/* Would the target take the text --stringify-meta makes of this entry? (The key may be what it
 * refuses, or the text: OINF's [A-Za-z0-9._-]+ refuses the quotes of a stringified string.) */
static bool stringify_helps(tbx_file *in, tbx_writer *w, const tbx_meta_entry *e) {
    if (!w->drv->w_check_meta) return true;
    tbx_value *s = stringify(in, e->value);
    if (!s) return true; /* cannot tell: keep the usual hint */
    tbx_error e2;
    bool ok = w->drv->w_check_meta(w, e->key, e->key_len, s, &e2) == TBX_OK;
    tbx_val_free(s);
    return ok;
}

void tbx_convert_hint(tbx_error *err, const char *hint) {
    size_t l = strlen(err->message);
    snprintf(err->message + l, sizeof err->message - l, " (%s)", hint);
}

/* llama.cpp's key for the file's quantization: rewritten when the conversion changes tensors */
#define FILE_TYPE_KEY "general.file_type"

/* Keeps v (made here) until the writer is done with it; false when out of memory (v freed). */
static bool keep_value(tbx_file *in, tbx_kept_values *kept, tbx_value *v) {
    if (!v) return false;
    if (!tbx_grow(&in->al, (void **)&kept->v, &kept->cap, kept->n + 1, sizeof *kept->v)) {
        tbx_val_free(v);
        return false;
    }
    kept->v[kept->n++] = v;
    return true;
}

/* The input's metadata, lent to the writer. ftype: when not NULL (the conversion changes
 * tensors), the input's general.file_type is written with this value (a u32, as llama.cpp and
 * gguf-py write it) so that it describes the output. */
/* Keys llama_model_quantize moves to the end (rewritten) or leaves out (a split set's). */
static bool llama_moved(const tbx_meta_entry *e) {
    static const char *const keys[] = {FILE_TYPE_KEY, "general.quantization_version",
                                       "split.no", "split.count", "split.tensors.count"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (e->key_len == strlen(keys[i]) && memcmp(e->key, keys[i], e->key_len) == 0)
            return true;
    return false;
}

static tbx_status copy_meta(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                            const uint32_t *ftype, tbx_kept_values *kept, bool llama,
                            tbx_error *err);

tbx_status tbx_convert_copy_meta(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                 const uint32_t *ftype, tbx_kept_values *kept, tbx_error *err) {
    return copy_meta(in, w, o, ftype, kept, false, err);
}

tbx_status tbx_convert_copy_meta_llama(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                       uint32_t ftype, tbx_kept_values *kept, tbx_error *err) {
    return copy_meta(in, w, o, &ftype, kept, true, err);
}

/* A GGUF split set's keys (split.no, split.count, split.tensors.count) describe the input's
 * files, not the model: a single output that kept them would claim to be part 1 of N (llama.cpp
 * then looks for the other parts), and a sharded output writes its own. */
static bool split_layout(const tbx_meta_entry *e) {
    static const char *const keys[] = {"split.no", "split.count", "split.tensors.count"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (e->key_len == strlen(keys[i]) && memcmp(e->key, keys[i], e->key_len) == 0)
            return true;
    return false;
}

static tbx_status copy_meta(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                            const uint32_t *ftype, tbx_kept_values *kept, bool llama,
                            tbx_error *err) {
    for (size_t i = 0; i < in->nmeta; i++) {
        const tbx_meta_entry *e = &in->meta[i];
        if (given_meta(o->meta, e->key, e->key_len)) continue; /* replaced by the caller's */
        if (llama && llama_moved(e)) continue;
        if (split_layout(e)) continue;
        const tbx_value *val = e->value;
        if (ftype && e->key_len == sizeof FILE_TYPE_KEY - 1 &&
            memcmp(e->key, FILE_TYPE_KEY, e->key_len) == 0) {
            tbx_value *v = tbx_val_new(&in->al, TBX_V_U32);
            if (v) v->v.u = *ftype;
            if (!keep_value(in, kept, v)) return tbx_err_nomem(err, "metadata value");
            val = v;
        }
        /* the input handle outlives the writer: its keys and values need no copies */
        tbx_status st = tbx_writer_add_meta_borrowed_(w, e->key, e->key_len, val, err);
        if (st == TBX_OK || !refusal(st)) { if (st) return st; continue; }
        /* stringifying helps only a target that stores strings (embd-legacy has no metadata) */
        const bool strings = tbx_driver_meta_ok(w->drv, TBX_V_STRING);
        if ((o->flags & TBX_CONVERT_STRINGIFY_META) && strings) {
            if (!tbx_grow(&in->al, (void **)&kept->v, &kept->cap, kept->n + 1, sizeof *kept->v))
                return tbx_err_nomem(err, "metadata text");
            tbx_value *s = stringify(in, val);
            if (!s) return tbx_err_nomem(err, "metadata text");
            kept->v[kept->n++] = s; /* the text is lent to the writer, not copied */
            st = tbx_writer_add_meta_borrowed_(w, e->key, e->key_len, s, err);
            if (st == TBX_OK) continue;
            if (!refusal(st)) return st;
            /* its text is refused too: dropped when that is allowed, else say what works */
            if (o->flags & TBX_CONVERT_DROP_META) continue;
            tbx_convert_hint(err, "its text form is refused too; leave it out with --drop-meta");
            return st;
        } else if (o->flags & TBX_CONVERT_DROP_META) {
            continue;
        } else {
            /* suggest only what works: the target may refuse the stringified text as well */
            tbx_error keep = *err;
            bool s_ok = strings && stringify_helps(in, w, e);
            *err = keep;
            tbx_convert_hint(err, !strings ? "allow dropping it with --drop-meta"
                             : s_ok   ? "allow it with --stringify-meta or --drop-meta"
                                      : "leave it out with --drop-meta; stringifying cannot "
                                        "help: its text form is refused too");
            return st;
        }
    }
    if (llama) { /* llama.cpp's GGML_QNT_VERSION, then the file type */
        static const char *const keys[] = {"general.quantization_version", FILE_TYPE_KEY};
        for (int k = 0; k < 2; k++) {
            if (given_meta(o->meta, keys[k], strlen(keys[k]))) continue;
            tbx_value *v = tbx_val_new(&in->al, TBX_V_U32);
            if (v) v->v.u = k == 0 ? 2u : *ftype;
            if (!keep_value(in, kept, v)) return tbx_err_nomem(err, "metadata value");
            tbx_status st = tbx_writer_add_meta_borrowed_(w, keys[k], strlen(keys[k]), v, err);
            if (st != TBX_OK) return st;
        }
    }
    return add_given_meta(w, o->meta, err);
}

/* Size variables (OINF) travel like metadata: refused ones fail unless dropping is allowed. */
tbx_status tbx_convert_copy_sizevars(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                     tbx_error *err) {
    for (uint64_t i = 0; i < tbx_sizevar_count(in); i++) {
        const char *name;
        size_t nl;
        uint64_t value;
        tbx_status st = tbx_sizevar_get(in, i, &name, &nl, &value);
        if (st == TBX_OK) st = tbx_writer_add_sizevar(w, name, value, err);
        if (st == TBX_OK) continue;
        if (refusal(st) && (o->flags & TBX_CONVERT_DROP_META)) continue;
        if (refusal(st)) {
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l,
                     " (size variable \"%s\"; allow dropping it with --drop-meta)", name);
        }
        return st;
    }
    return TBX_OK;
}

tbx_status tbx_convert_copy_sections(tbx_file *in, tbx_writer *w, const tbx_convert_options *o,
                                     tbx_error *err) {
    return tbx_convert_copy_sections_but(in, w, o, NULL, err);
}

tbx_status tbx_convert_copy_sections_but(tbx_file *in, tbx_writer *w,
                                         const tbx_convert_options *o,
                                         bool (*skip)(const char *name), tbx_error *err) {
    for (size_t i = 0; i < in->nsections; i++) {
        const tbx_section *s = &in->sections[i];
        if (skip && skip(s->name)) continue;
        /* the writer's answer first (a section it refuses is dropped or named unread), then
         * the bytes, read whole within the one side-file limit (max_side_file_bytes) */
        tbx_status st = tbx_writer_check_section_(w, s->name, s->type,
                                                  s->size > SIZE_MAX ? SIZE_MAX : (size_t)s->size,
                                                  err);
        if (st == TBX_OK) {
            void *buf = NULL;
            size_t n = 0;
            st = tbx_section_load_(in, i, &buf, &n, err);
            if (st != TBX_OK) return st;
            st = tbx_writer_add_section(w, s->name, s->type, buf, n, err);
            tbx_free(&in->al, buf, n ? n : 1);
        }
        if (st == TBX_OK) continue;
        if (refusal(st) && (o->flags & TBX_CONVERT_DROP_SECTIONS)) continue;
        if (refusal(st)) {
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l, " (allow it with --drop-sections)");
        }
        return st;
    }
    return TBX_OK;
}
