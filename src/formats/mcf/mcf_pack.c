/*
 * mcf_pack.c - what mantle's `pack` does to a Hugging Face directory's tokenizer_config.json
 * (used by the MCF writer, mcf_write.c, when it converts a directory; see docs/formats/mcf.md,
 * "From a Hugging Face directory").
 *
 * pack never copies tokenizer_config.json verbatim when it holds a non-empty JSON object: it
 * decodes it into a Go map (numbers become float64), adds "chat_template" = the
 * whitespace-trimmed chat_template.jinja when the map has no non-blank string there, and writes
 * Go's json.Marshal of the map:
 *
 *   - objects: members sorted by the bytes of their keys, compact ({"a":1,"b":[true,null]});
 *   - strings: '"' and '\' escaped, \b \f \n \r \t, other bytes below 0x20 and < > & as \u00XX,
 *     U+2028 / U+2029 as \u2028 / \u2029, every byte of invalid UTF-8 as \ufffd, the rest as is;
 *   - numbers: the shortest decimal that reads back as the same float64, as %f would print it
 *     when 1e-6 <= |x| < 1e21 (or x = 0), else as %e with a one-digit exponent kept one digit
 *     ("1e-7", "1.5e+21");
 *   - an empty map (no member, no template): the file's bytes as they are.
 *
 * This file writes its own encoder over jansson's values; jansson decodes (integers as reals,
 * as Go does; NUL allowed in strings; duplicate keys rejected, where Go keeps the last one).
 */
#include "mcf_int.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef tbx_membuf pk_buf;

static void pk_put(pk_buf *b, const void *p, size_t n) { tbx_membuf_put(b, p, n); }
static void pk_c(pk_buf *b, char c) { pk_put(b, &c, 1); }
static void pk_s(pk_buf *b, const char *s) { pk_put(b, s, strlen(s)); }

/* One UTF-8 sequence at p (n bytes left): its code point and length, or -1 when invalid
 * (Go's utf8.DecodeRune: shortest form, no surrogates, at most U+10FFFF). */
static long pk_rune(const uint8_t *p, size_t n, size_t *len) {
    *len = 1;
    uint8_t c = p[0];
    if (c < 0x80) return c;
    size_t k;
    long r, min;
    if (c >= 0xC2 && c <= 0xDF) { k = 2; r = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; r = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; r = c & 0x07; min = 0x10000; }
    else return -1;
    if (n < k) return -1;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return -1;
        r = (r << 6) | (p[i] & 0x3F);
    }
    if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return -1;
    *len = k;
    return r;
}

/* Go's unicode.IsSpace */
static bool pk_space(long r) {
    return r == ' ' || (r >= '\t' && r <= '\r') || r == 0x85 || r == 0xA0 || r == 0x1680 ||
           (r >= 0x2000 && r <= 0x200A) || r == 0x2028 || r == 0x2029 || r == 0x202F ||
           r == 0x205F || r == 0x3000;
}

void mcf_pack_trim(const uint8_t **p, size_t *n) {
    const uint8_t *s = *p;
    size_t a = 0, b = *n, len;
    while (a < b) {
        long r = pk_rune(s + a, b - a, &len);
        if (r < 0 || !pk_space(r)) break;
        a += len;
    }
    while (b > a) { /* the last rune: step back over continuation bytes (at most 3) */
        size_t st = b - 1;
        while (st > a && b - st < 4 && (s[st] & 0xC0) == 0x80) st--;
        long r = pk_rune(s + st, b - st, &len);
        if (r < 0 || st + len != b) { r = -1; }
        if (r < 0 || !pk_space(r)) break;
        b = st;
    }
    *p = s + a;
    *n = b - a;
}

static void pk_string(pk_buf *b, const uint8_t *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    pk_c(b, '"');
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        if (c < 0x80) {
            if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') { i++; continue; }
            pk_put(b, s + start, i - start);
            char e[7] = {'\\', 0, 0, 0, 0, 0, 0};
            size_t k = 2;
            switch (c) {
            case '\\': case '"': e[1] = (char)c; break;
            case '\b': e[1] = 'b'; break;
            case '\f': e[1] = 'f'; break;
            case '\n': e[1] = 'n'; break;
            case '\r': e[1] = 'r'; break;
            case '\t': e[1] = 't'; break;
            default:
                e[1] = 'u'; e[2] = '0'; e[3] = '0'; e[4] = hex[c >> 4]; e[5] = hex[c & 15];
                k = 6;
            }
            pk_put(b, e, k);
            start = ++i;
            continue;
        }
        size_t len;
        long r = pk_rune(s + i, n - i, &len);
        if (r < 0) {
            pk_put(b, s + start, i - start);
            pk_s(b, "\\ufffd");
            start = ++i;
            continue;
        }
        if (r == 0x2028 || r == 0x2029) {
            pk_put(b, s + start, i - start);
            pk_s(b, r == 0x2028 ? "\\u2028" : "\\u2029");
            start = i + len;
        }
        i += len;
    }
    pk_put(b, s + start, n - start);
    pk_c(b, '"');
}

/* Go's float64 encoding (strconv 'f' or 'e' with the shortest round-trip digits). */
static void pk_number(pk_buf *b, double x) {
    char out[64];
    if (x == 0) { pk_s(b, signbit(x) ? "-0" : "0"); return; }
    /* the shortest precision whose correctly rounded digits read back as x */
    char e[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e = [-]d[.ddd]e[+-]XX: collect the digits and the exponent */
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    char dig[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') dig[nd++] = *q;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int ex = atoi(q + 1);
    size_t o = 0;
    if (neg) out[o++] = '-';
    double ax = fabs(x);
    if (ax < 1e-6 || ax >= 1e21) {
        out[o++] = dig[0];
        if (nd > 1) { out[o++] = '.'; memcpy(out + o, dig + 1, (size_t)nd - 1); o += (size_t)nd - 1; }
        int ae = ex < 0 ? -ex : ex;
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%s%d", ex < 0 ? '-' : '+',
                              ae < 10 && ex >= 0 ? "0" : "", ae);
    } else if (ex < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -ex - 1; i++) out[o++] = '0';
        memcpy(out + o, dig, (size_t)nd);
        o += (size_t)nd;
    } else {
        for (int i = 0; i <= ex || i < nd; i++) {
            if (i == ex + 1) out[o++] = '.';
            out[o++] = i < nd ? dig[i] : '0';
        }
    }
    pk_put(b, out, o);
}

typedef struct pk_member {
    const char *key;
    size_t klen;
    json_t *v;
} pk_member;

static int pk_member_cmp(const void *a, const void *b) {
    const pk_member *x = a, *y = b;
    size_t m = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, m);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static void pk_value(pk_buf *b, json_t *v, int depth) {
    if (b->oom) return;
    if (depth > 256) { b->oom = true; return; } /* jansson's own parse depth limit is lower */
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        pk_member *m = n ? tbx_calloc(b->al, n, sizeof *m) : NULL;
        if (n && !m) { b->oom = true; return; }
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach(v, k, kl, x) {
            if (i == n) break;
            m[i].key = k;
            m[i].klen = kl;
            m[i].v = x;
            i++;
        }
        n = i;
        if (n > 1) qsort(m, n, sizeof *m, pk_member_cmp);
        pk_c(b, '{');
        for (i = 0; i < n; i++) {
            if (i) pk_c(b, ',');
            pk_string(b, (const uint8_t *)m[i].key, m[i].klen);
            pk_c(b, ':');
            pk_value(b, m[i].v, depth + 1);
        }
        pk_c(b, '}');
        tbx_free(b->al, m, n * sizeof *m);
        break;
    }
    case JSON_ARRAY:
        pk_c(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) pk_c(b, ',');
            pk_value(b, json_array_get(v, i), depth + 1);
        }
        pk_c(b, ']');
        break;
    case JSON_STRING:
        pk_string(b, (const uint8_t *)json_string_value(v), json_string_length(v));
        break;
    case JSON_REAL: pk_number(b, json_real_value(v)); break;
    case JSON_INTEGER: pk_number(b, (double)json_integer_value(v)); break;
    case JSON_TRUE: pk_s(b, "true"); break;
    case JSON_FALSE: pk_s(b, "false"); break;
    default: pk_s(b, "null"); break;
    }
}

tbx_status mcf_pack_tokcfg(const tbx_alloc *al, const uint8_t *cfg, size_t cfg_len, bool have_cfg,
                           const uint8_t *tpl, size_t tpl_len, bool have_tpl, uint8_t **out,
                           size_t *out_len, tbx_error *err) {
    *out = NULL;
    *out_len = 0;
    if (!have_cfg && !have_tpl) return TBX_OK;
    json_t *o = NULL;
    if (have_cfg && cfg_len) {
        json_error_t je;
        o = json_loadb((const char *)cfg, cfg_len,
                       JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
        if (!o)
            return tbx_err(err, TBX_E_FORMAT, (uint64_t)je.position, "tokenizer_config.json",
                           "tokenizer_config.json: %s (line %d)", je.text, je.line);
        if (json_is_null(o)) { json_decref(o); o = NULL; }
        else if (!json_is_object(o)) {
            json_decref(o);
            return tbx_err(err, TBX_E_FORMAT, 0, "tokenizer_config.json",
                           "tokenizer_config.json is not a JSON object");
        }
    }
    if (!o && !(o = json_object())) return tbx_err_nomem(err, "tokenizer_config.json");
    const uint8_t *t = tpl;
    size_t tn = tpl_len;
    if (have_tpl) mcf_pack_trim(&t, &tn);
    if (have_tpl && tn) {
        json_t *ex = json_object_get(o, "chat_template");
        const uint8_t *es = ex && json_is_string(ex) ? (const uint8_t *)json_string_value(ex) : NULL;
        size_t en = es ? json_string_length(ex) : 0;
        if (es) mcf_pack_trim(&es, &en);
        if (en == 0) {
            json_t *s = json_stringn_nocheck((const char *)t, tn);
            if (!s || json_object_set_new(o, "chat_template", s) != 0) {
                json_decref(o);
                return tbx_err_nomem(err, "tokenizer_config.json");
            }
        }
    }
    pk_buf b = {al, NULL, 0, 0, false};
    if (json_object_size(o) == 0) {
        if (have_cfg) pk_put(&b, cfg, cfg_len); /* pack keeps the bytes of an empty object */
    } else {
        pk_value(&b, o, 0);
    }
    json_decref(o);
    if (b.oom) { tbx_free(al, b.p, b.cap); return tbx_err_nomem(err, "tokenizer_config.json"); }
    if (b.n == 0) { tbx_free(al, b.p, b.cap); return TBX_OK; }
    /* hand over exactly n bytes */
    uint8_t *p = tbx_realloc(al, b.p, b.cap, b.n);
    if (!p) { tbx_free(al, b.p, b.cap); return tbx_err_nomem(err, "tokenizer_config.json"); }
    *out = p;
    *out_len = b.n;
    return TBX_OK;
}
