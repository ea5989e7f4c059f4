/*
 * hf_tokenizer.c - tokenizer.json checked and read without a tree of its large members (see
 * hf_tokenizer.h for the contract).
 *
 * Why not jansson's tree: a tokenizer of a few million tokens (a 65 MiB tokenizer.json) costs
 * jansson about 7 bytes of tree per byte of text and 5 s to build and free; the conversions
 * built their arrays from that tree and stayed far above 2 x the model directory's size
 * (docs/formats/gguf.md, "tokenizer.json", has the measurements). jansson has no streaming
 * interface, so this file walks the text itself.
 *
 * The check (tj_check) is one pass with an explicit stack of the open objects and arrays (no
 * recursion). For each open object it keeps the keys seen so far: the first TJ_INLINE in the
 * level itself, then all of them in a tbx_names index whose entries are key positions (a key
 * without escapes is its place in the text; an escaped one is decoded once into `keys`, a stack
 * that shrinks when its object closes). The index of an object of TJ_RESERVE_MIN members or more
 * is sized once for all of them (10.7 bytes a key; grown by doubling it would reach 21 and hold
 * the old table while growing): a first pass (tj_precount) counts every object's members, a
 * hint only (the text is not checked yet), kept for those large objects. A key index is below
 * 2^32 - 1 because texts above
 * TBX_TOKJ_MAX_BYTES (1 GiB) are refused: an escaped key's entry takes at most 10/7 of its
 * member's text, so n + the stack stays below 2.5 GiB. The rules are jansson's (load.c, with
 * JSON_REJECT_DUPLICATES and without JSON_ALLOW_NUL), so that a file reads here exactly when it
 * read before:
 *   - UTF-8 without overlongs, surrogates or code points above U+10FFFF;
 *   - strings without raw control bytes (< 0x20); escapes \" \\ \/ \b \f \n \r \t \uXXXX, a
 *     high surrogate only with a low one after it, no lone low surrogate, no \u0000;
 *   - numbers as RFC 8259 writes them; an integer (no fraction, no exponent) within signed
 *     64 bits, a real whose magnitude does not round beyond the largest double;
 *   - true, false, null; JSON whitespace is space, tab, LF, CR;
 *   - one value (here: an object) and nothing after it but whitespace.
 * One difference, on purpose: jansson's lexer drops a NUL byte that directly follows a number or
 * a literal (`[1\0]` reads as [1]: a NUL put back into its buffer reads as the buffer's end);
 * here that NUL is the invalid JSON it is. fuzz/fuzz_tokjson.c and tests/unit/
 * test_hf_tokenizer.c hold this walker to jansson's verdicts otherwise.
 */
#include "hf_tokenizer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TJ_INLINE 8        /* keys of an object compared one by one before an index is built */
#define TJ_RESERVE_MIN 64  /* members from which an object's index is sized at once */

static inline bool tj_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static inline bool tj_digit(char c) { return c >= '0' && c <= '9'; }

static size_t tj_skip_ws(const char *p, size_t n, size_t i) {
    while (i < n && tj_ws(p[i])) i++;
    return i;
}

/* ------------------------------------------------------------------------------------------ */
/* The check                                                                                   */
/* ------------------------------------------------------------------------------------------ */
typedef struct tj_level {
    size_t at;              /* its '{' or '[' */
    uint64_t count;         /* members or elements begun so far */
    uint32_t key;           /* object: index of the current member's key */
    bool obj, indexed;
    size_t mark;            /* length of `keys` when it opened */
    uint32_t inl[TJ_INLINE];
    tbx_names names;        /* indexed: every key of the object */
} tj_level;

typedef struct tj_count {
    uint32_t at;    /* the object's '{' */
    uint32_t count; /* its members, as tj_precount counted them */
} tj_count;

typedef struct tj_check {
    const tbx_alloc *al;
    const char *p;
    size_t n;
    const char *name;
    tbx_error *err;
    tj_level *lv;
    size_t depth, cap;
    /* decoded escaped keys of the open objects: entries [u32 len][u32 offset in text][bytes],
     * key index n + (offset of the entry) */
    char *keys;
    size_t keys_len, keys_cap;
    /* objects of at least TJ_RESERVE_MIN members, by position */
    tj_count *big;
    size_t nbig, big_cap;
} tj_check;

static const char *tj_key_of(const void *ctx, uint64_t idx, size_t *len) {
    const tj_check *c = ctx;
    if (idx < c->n) {
        const char *s = c->p + idx + 1;
        const char *e = memchr(s, '"', c->n - (size_t)idx - 1);
        *len = e ? (size_t)(e - s) : 0;
        return s;
    }
    const char *e = c->keys + (idx - c->n);
    uint32_t l;
    memcpy(&l, e, 4);
    *len = l;
    return e + 8;
}

/* The byte offset of key `idx` in the text. */
static size_t tj_key_at(const tj_check *c, uint32_t idx) {
    if (idx < c->n) return idx;
    uint32_t at;
    memcpy(&at, c->keys + (idx - c->n) + 4, 4);
    return at;
}

/* Appends the place in the JSON of level `d`'s current member or element to buf. */
static void tj_place_part(const tj_check *c, size_t d, char *buf, size_t cap) {
    const tj_level *l = &c->lv[d];
    size_t used = strlen(buf);
    if (used + 1 >= cap) return;
    if (!l->obj) {
        snprintf(buf + used, cap - used, "[%" PRIu64 "]", l->count ? l->count - 1 : 0);
        return;
    }
    size_t len;
    const char *k = tj_key_of(c, l->key, &len);
    bool plain = len > 0 && len <= 40;
    for (size_t i = 0; plain && i < len; i++)
        plain = (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') || k[i] == '_' ||
                (i > 0 && tj_digit(k[i]));
    if (plain) {
        snprintf(buf + used, cap - used, "%s%.*s", d ? "." : "", (int)len, k);
    } else {
        char q[96];
        tbx_quote_bytes(q, sizeof q, k, len, 40);
        snprintf(buf + used, cap - used, "[\"%s\"]", q);
    }
}

/* Where the walk is: the innermost container ("model.vocab"), with the member or element
 * being read when `child`. */
static void tj_place(const tj_check *c, bool child, char *buf, size_t cap) {
    buf[0] = 0;
    size_t upto = c->depth ? c->depth - 1 : 0;
    if (child && c->depth) upto = c->depth;
    for (size_t d = 0; d < upto; d++) tj_place_part(c, d, buf, cap);
    if (!buf[0]) snprintf(buf, cap, "the top-level object");
    if (strlen(buf) + 1 >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
}

static tbx_status __attribute__((format(printf, 5, 6)))
tj_fail(tj_check *c, tbx_status code, size_t at, bool child, const char *fmt, ...) {
    char what[200], where[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tj_place(c, child, where, sizeof where);
    return tbx_err(c->err, code, at, c->name, "%s: %s (in %s)", c->name, what, where);
}

/* A syntax error at byte i ("near" the byte found there). */
static tbx_status tj_syntax(tj_check *c, size_t i, bool child, const char *expected) {
    char near[24];
    unsigned char ch = (unsigned char)c->p[i];
    if (ch >= 0x20 && ch < 0x7f) snprintf(near, sizeof near, "'%c'", ch);
    else snprintf(near, sizeof near, "byte 0x%02x", ch);
    return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: expected %s, found %s", expected,
                   near);
}

/* The text ended inside the JSON. */
static tbx_status tj_truncated(tj_check *c, bool child) {
    return tj_fail(c, TBX_E_TRUNCATED, c->n, child, "the text ends before the JSON does "
                   "(the file is truncated)");
}

/* Length of the UTF-8 sequence starting at p (n bytes available): its length when valid, 0
 * when invalid, SIZE_MAX when the bytes there are the start of a valid sequence cut short. */
static size_t tj_utf8(const unsigned char *s, size_t n) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return 0;
    for (size_t k = 1; k < len; k++) {
        if (k >= n) return SIZE_MAX;
        unsigned char b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return 0;
    }
    return len;
}

/* The value of 4 hex digits at s, or -1 (a non-hex byte) / -2 (fewer than 4 bytes left, all
 * hex). */
static long tj_hex4(const char *s, size_t avail) {
    long v = 0;
    for (size_t k = 0; k < 4; k++) {
        if (k >= avail) return -2;
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The string at i (its '"'): *end after its closing quote, *esc whether it has escapes. */
static tbx_status tj_string(tj_check *c, size_t i, bool child, size_t *end, bool *esc) {
    const char *p = c->p;
    size_t n = c->n;
    *esc = false;
    for (i++;;) {
        if (i >= n) return tj_truncated(c, child);
        unsigned char ch = (unsigned char)p[i];
        if (ch == '"') { *end = i + 1; return TBX_OK; }
        if (ch >= 0x20 && ch < 0x80 && ch != '\\') { i++; continue; }
        if (ch >= 0x80) {
            size_t l = tj_utf8((const unsigned char *)p + i, n - i);
            if (l == SIZE_MAX) return tj_truncated(c, child);
            if (l == 0)
                return tj_fail(c, TBX_E_FORMAT, i, child, "invalid UTF-8 (byte 0x%02x)", ch);
            i += l;
            continue;
        }
        if (ch < 0x20)
            return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: control byte 0x%02x in a "
                           "string (JSON escapes it)", ch);
        /* an escape */
        *esc = true;
        if (i + 1 >= n) return tj_truncated(c, child);
        char e = p[i + 1];
        if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
            e == 't') {
            i += 2;
            continue;
        }
        if (e != 'u') {
            char shown[24];
            if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f)
                snprintf(shown, sizeof shown, "\\%c", e);
            else
                snprintf(shown, sizeof shown, "\\ and byte 0x%02x", (unsigned char)e);
            return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: invalid escape %s", shown);
        }
        long u = tj_hex4(p + i + 2, n - i - 2);
        if (u == -2) return tj_truncated(c, child);
        if (u < 0) return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: \\u without 4 hex "
                                  "digits");
        if (u == 0)
            return tj_fail(c, TBX_E_UNSUPPORTED, i, child, "a string containing NUL (\\u0000) "
                           "is not supported");
        if (u >= 0xDC00 && u <= 0xDFFF)
            return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: \\u%04lX is a low "
                           "surrogate without a high one before it", u);
        if (u >= 0xD800 && u <= 0xDBFF) {
            /* a low surrogate escape must follow */
            size_t j = i + 6;
            if (j >= n || (p[j] == '\\' && j + 1 >= n)) return tj_truncated(c, child);
            long lo = p[j] == '\\' && p[j + 1] == 'u' ? tj_hex4(p + j + 2, n - j - 2) : -1;
            if (lo == -2) return tj_truncated(c, child);
            if (lo < 0xDC00 || lo > 0xDFFF)
                return tj_fail(c, TBX_E_FORMAT, i, child, "invalid JSON: \\u%04lX is a high "
                               "surrogate without a low one after it", u);
            i += 12;
            continue;
        }
        i += 6;
    }
}

/* 2^1024 - 2^970: the smallest magnitude strtod rounds to infinity (the largest double plus
 * half its last unit, a tie that rounds to even, i.e. up). 309 digits. */
static const char TJ_DBL_LIMIT[] =
    "1797693134862315807937289714053034150799341327100378269361737789804449682927647509466490"
    "1797758720709633028641669288791094655554785194040263065748867150582068190890200070838367"
    "6273854845817711531764475730270069855571366959622842914819860834936475292719074168444365"
    "510704342711559699508093042880177904174497792";

/* Does the real number [s, s+len) (JSON syntax, checked) round to a magnitude beyond the
 * largest double (strtod's ERANGE with HUGE_VAL, which jansson refuses)? Decided on the
 * digits: value = 0.D x 10^q with D the significant digits. */
static bool tj_real_overflows(const char *s, size_t len) {
    size_t i = 0;
    if (s[i] == '-') i++;
    size_t int_at = i;
    while (i < len && tj_digit(s[i])) i++;
    size_t int_end = i, frac_at = i, frac_end = i;
    if (i < len && s[i] == '.') {
        frac_at = ++i;
        while (i < len && tj_digit(s[i])) i++;
        frac_end = i;
    }
    int64_t exp = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool neg = false;
        if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
        for (; i < len; i++) {
            if (exp < 1000000000) exp = exp * 10 + (s[i] - '0');
        }
        if (neg) exp = -exp;
    }
    /* the first significant digit */
    size_t lead = int_at;
    while (lead < int_end && s[lead] == '0') lead++;
    int64_t q;
    if (lead < int_end) {
        q = (int64_t)(int_end - lead) + exp;
    } else {
        lead = frac_at;
        while (lead < frac_end && s[lead] == '0') lead++;
        if (lead == frac_end) return false; /* zero */
        q = exp - (int64_t)(lead - frac_at);
    }
    if (q < 309) return false;  /* below 10^308 */
    if (q > 309) return true;   /* at least 10^309 */
    /* compare D with the limit's digits */
    size_t k = 0;
    for (size_t j = lead; j < frac_end; j++) {
        if (j == int_end) continue; /* the '.' */
        char d = s[j];
        char m = k < sizeof TJ_DBL_LIMIT - 1 ? TJ_DBL_LIMIT[k] : '0';
        k++;
        if (d != m) return d > m;
    }
    /* D ran out: equal so far; greater or equal only if the limit's rest is zeros */
    for (; k < sizeof TJ_DBL_LIMIT - 1; k++)
        if (TJ_DBL_LIMIT[k] != '0') return false;
    return true;
}

/* The number at i: *end after it. */
static tbx_status tj_number(tj_check *c, size_t i, bool child, size_t *end) {
    const char *p = c->p;
    size_t n = c->n, at = i;
    bool neg = p[i] == '-';
    if (neg) i++;
    if (i >= n) return tj_truncated(c, child);
    if (p[i] == '0') {
        i++;
    } else if (tj_digit(p[i])) {
        while (i < n && tj_digit(p[i])) i++;
    } else {
        return tj_syntax(c, i, child, "a digit");
    }
    size_t int_end = i;
    bool is_int = true;
    if (i < n && p[i] == '.') {
        i++;
        if (i >= n) return tj_truncated(c, child);
        if (!tj_digit(p[i])) return tj_syntax(c, i, child, "a digit after '.'");
        while (i < n && tj_digit(p[i])) i++;
        is_int = false;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        if (i >= n) return tj_truncated(c, child);
        if (!tj_digit(p[i])) return tj_syntax(c, i, child, "a digit in the exponent");
        while (i < n && tj_digit(p[i])) i++;
        is_int = false;
    }
    *end = i;
    if (is_int) {
        /* within signed 64 bits (jansson's json_int_t) */
        uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t k = neg ? at + 1 : at; k < int_end; k++) {
            uint64_t d = (uint64_t)(p[k] - '0');
            if (v > (lim - d) / 10)
                return tj_fail(c, TBX_E_OVERFLOW, at, child, "the integer %.*s%s is out of "
                               "range (JSON integers are read as signed 64-bit)",
                               (int)(int_end - at > 40 ? 40 : int_end - at), p + at,
                               int_end - at > 40 ? "..." : "");
            v = v * 10 + d;
        }
    } else if (tj_real_overflows(p + at, i - at)) {
        return tj_fail(c, TBX_E_OVERFLOW, at, child, "the number %.*s%s is beyond the range of "
                       "a double", (int)(i - at > 40 ? 40 : i - at), p + at,
                       i - at > 40 ? "..." : "");
    }
    return TBX_OK;
}

/* true / false / null at i. */
static tbx_status tj_literal(tj_check *c, size_t i, bool child, size_t *end) {
    const char *lit = c->p[i] == 't' ? "true" : c->p[i] == 'f' ? "false" : "null";
    size_t l = strlen(lit);
    for (size_t k = 0; k < l; k++) {
        if (i + k >= c->n) return tj_truncated(c, child);
        if (c->p[i + k] != lit[k]) return tj_syntax(c, i + k, child, "a JSON value");
    }
    *end = i + l;
    return TBX_OK;
}

static int tj_count_cmp(const void *a, const void *b) {
    uint32_t x = ((const tj_count *)a)->at, y = ((const tj_count *)b)->at;
    return x < y ? -1 : x > y;
}

/* Counts the members of every object in one pass over the text (strings skipped, brackets
 * matched by depth; unchecked text, so the counts are sizing hints) and keeps, sorted by
 * position, those of TJ_RESERVE_MIN members or more. */
static tbx_status tj_precount(tj_check *c) {
    typedef struct { uint32_t at; uint32_t commas; bool obj, used; } lv;
    lv *st = NULL;
    size_t cap = 0, depth = 0, deeper = 0;
    const char *p = c->p;
    size_t n = c->n;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') continue;
        if (ch == '"') {
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\') i++;
            if (depth && !deeper) st[depth - 1].used = true;
            continue;
        }
        if (ch == '{' || ch == '[') {
            if (depth && !deeper) st[depth - 1].used = true;
            if (deeper || depth == TBX_TOKJ_MAX_DEPTH) { deeper++; continue; }
            if (!tbx_grow(c->al, (void **)&st, &cap, depth + 1, sizeof *st)) goto nomem;
            st[depth++] = (lv){(uint32_t)i, 0, ch == '{', false};
        } else if (ch == '}' || ch == ']') {
            if (deeper) { deeper--; continue; }
            if (!depth) continue;
            lv *l = &st[--depth];
            uint64_t members = l->used ? (uint64_t)l->commas + 1 : 0;
            if (!l->obj || members < TJ_RESERVE_MIN) continue;
            if (!tbx_grow(c->al, (void **)&c->big, &c->big_cap, c->nbig + 1, sizeof *c->big))
                goto nomem;
            c->big[c->nbig++] = (tj_count){l->at, (uint32_t)members};
        } else if (ch == ',') {
            if (depth && !deeper) st[depth - 1].commas++;
        } else if (depth && !deeper) {
            st[depth - 1].used = true;
        }
    }
    tbx_free(c->al, st, cap * sizeof *st);
    if (c->nbig > 1) qsort(c->big, c->nbig, sizeof *c->big, tj_count_cmp);
    return TBX_OK;
nomem:
    tbx_free(c->al, st, cap * sizeof *st);
    return tbx_err_nomem(c->err, c->name);
}

/* The member count tj_precount found for the object at `at`, or 0. */
static size_t tj_count_of(const tj_check *c, size_t at) {
    size_t lo = 0, hi = c->nbig;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->big[mid].at < at) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->nbig && c->big[lo].at == at ? c->big[lo].count : 0;
}

static tbx_status tj_push(tj_check *c, size_t at, bool obj) {
    if (c->depth >= TBX_TOKJ_MAX_DEPTH)
        return tj_fail(c, TBX_E_LIMIT, at, true, "JSON nested deeper than %d levels",
                       TBX_TOKJ_MAX_DEPTH);
    if (!tbx_grow(c->al, (void **)&c->lv, &c->cap, c->depth + 1, sizeof *c->lv))
        return tbx_err_nomem(c->err, c->name);
    tj_level *l = &c->lv[c->depth++];
    memset(l, 0, sizeof *l);
    l->at = at;
    l->obj = obj;
    l->mark = c->keys_len;
    return TBX_OK;
}

static void tj_pop(tj_check *c) {
    tj_level *l = &c->lv[--c->depth];
    if (l->indexed) tbx_names_free(&l->names);
    c->keys_len = l->mark;
}

static bool tj_key_eq(const tj_check *c, uint32_t a, uint32_t b) {
    size_t la, lb;
    const char *ka = tj_key_of(c, a, &la), *kb = tj_key_of(c, b, &lb);
    return la == lb && memcmp(ka, kb, la) == 0;
}

static size_t tj_unescape(const char *s, size_t raw, char *out);

/* The key [kat, kend) of the innermost object: recorded, and refused when the object has it
 * already. */
static tbx_status tj_key(tj_check *c, size_t kat, size_t kend, bool esc) {
    tj_level *l = &c->lv[c->depth - 1];
    uint32_t idx = (uint32_t)kat;
    if (esc) {
        size_t raw = kend - kat - 2;
        if (!tbx_grow(c->al, (void **)&c->keys, &c->keys_cap, c->keys_len + 8 + raw + 1, 1))
            return tbx_err_nomem(c->err, c->name);
        char *e = c->keys + c->keys_len;
        uint32_t len = (uint32_t)tj_unescape(c->p + kat + 1, raw, e + 8);
        uint32_t at = (uint32_t)kat;
        memcpy(e, &len, 4);
        memcpy(e + 4, &at, 4);
        idx = (uint32_t)(c->n + c->keys_len);
        c->keys_len += 8 + len;
    }
    l->key = idx;
    l->count++;
    uint32_t earlier = 0;
    bool dup = false;
    if (!l->indexed && l->count <= TJ_INLINE) {
        for (uint64_t j = 0; j + 1 < l->count && !dup; j++)
            if (tj_key_eq(c, l->inl[j], idx)) { dup = true; earlier = l->inl[j]; }
        if (!dup) l->inl[l->count - 1] = idx;
    } else {
        if (!l->indexed) {
            tbx_names_init(&l->names, c->al, tj_key_of, c);
            l->indexed = true;
            /* a large object's index sized at once (a failure leaves it to grow) */
            size_t want = tj_count_of(c, l->at);
            if (want) (void)tbx_names_reserve(&l->names, want);
            for (size_t j = 0; j < TJ_INLINE; j++)
                if (tbx_names_insert(&l->names, l->inl[j], NULL) != TBX_OK)
                    return tbx_err_nomem(c->err, c->name);
        }
        uint64_t e = 0;
        tbx_status st = tbx_names_insert(&l->names, idx, &e);
        if (st == TBX_E_DUPLICATE) { dup = true; earlier = (uint32_t)e; }
        else if (st != TBX_OK) return tbx_err_nomem(c->err, c->name);
    }
    if (!dup) return TBX_OK;
    size_t len;
    const char *k = tj_key_of(c, idx, &len);
    char q[96];
    tbx_quote_bytes(q, sizeof q, k, len, 64);
    return tj_fail(c, TBX_E_DUPLICATE, kat, false, "duplicate key \"%s\" (first at byte %zu)",
                   q, tj_key_at(c, earlier));
}

enum { S_VALUE, S_VALUE_OR_END, S_KEY, S_KEY_OR_END, S_AFTER };

static tbx_status tj_check_text(tj_check *c) {
    const char *p = c->p;
    size_t n = c->n;
    size_t i = tj_skip_ws(p, n, 0);
    if (i >= n)
        return tbx_err(c->err, TBX_E_TRUNCATED, n, c->name, "%s: %s", c->name,
                       n ? "only whitespace, no JSON object (the file is truncated)"
                         : "the file is empty (the file is truncated)");
    if (p[i] != '{')
        return tbx_err(c->err, TBX_E_FORMAT, i, c->name, "%s is not a JSON object (it starts "
                       "with %s)", c->name, p[i] == '[' ? "an array" : "something else");
    tbx_status st = tj_push(c, i, true);
    int state = S_KEY_OR_END;
    i++;
    while (st == TBX_OK) {
        i = tj_skip_ws(p, n, i);
        if (state == S_AFTER && c->depth == 0) {
            if (i < n)
                return tbx_err(c->err, TBX_E_FORMAT, i, c->name, "%s: invalid JSON: data after "
                               "the top-level object", c->name);
            return TBX_OK;
        }
        if (i >= n) return tj_truncated(c, state == S_VALUE);
        tj_level *top = &c->lv[c->depth - 1];
        char ch = p[i];
        size_t end = i;
        bool esc;
        switch (state) {
        case S_KEY_OR_END:
            if (ch == '}') { tj_pop(c); i++; state = S_AFTER; break; }
            /* fall through */
        case S_KEY:
            if (ch != '"')
                return tj_syntax(c, i, false, state == S_KEY ? "'\"' (an object key)"
                                                             : "'\"' (an object key) or '}'");
            if ((st = tj_string(c, i, false, &end, &esc)) != TBX_OK) return st;
            if ((st = tj_key(c, i, end, esc)) != TBX_OK) return st;
            i = tj_skip_ws(p, n, end);
            if (i >= n) return tj_truncated(c, true);
            if (p[i] != ':') return tj_syntax(c, i, true, "':' after an object key");
            i++;
            state = S_VALUE;
            break;
        case S_VALUE_OR_END:
            if (ch == ']') { tj_pop(c); i++; state = S_AFTER; break; }
            /* fall through */
        case S_VALUE:
            if (!top->obj && state == S_VALUE_OR_END) top->count++;
            state = S_AFTER;
            if (ch == '{') {
                st = tj_push(c, i, true);
                state = S_KEY_OR_END;
                end = i + 1;
            } else if (ch == '[') {
                st = tj_push(c, i, false);
                state = S_VALUE_OR_END;
                end = i + 1;
            } else if (ch == '"') {
                st = tj_string(c, i, true, &end, &esc);
            } else if (ch == '-' || tj_digit(ch)) {
                st = tj_number(c, i, true, &end);
            } else if (ch == 't' || ch == 'f' || ch == 'n') {
                st = tj_literal(c, i, true, &end);
            } else {
                return tj_syntax(c, i, true, "a JSON value");
            }
            i = end;
            break;
        default: /* S_AFTER */
            if (ch == ',') {
                i++;
                if (top->obj) {
                    state = S_KEY;
                } else {
                    top->count++;
                    state = S_VALUE;
                }
            } else if (ch == (top->obj ? '}' : ']')) {
                tj_pop(c);
                i++;
            } else {
                return tj_syntax(c, i, false, top->obj ? "',' or '}' after an object member"
                                                       : "',' or ']' after an array element");
            }
            break;
        }
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Walking checked text                                                                         */
/* ------------------------------------------------------------------------------------------ */
/* After the string at i (its '"'); *esc whether it has escapes. */
static size_t tj_str_end(const char *p, size_t n, size_t i, bool *esc) {
    *esc = false;
    for (i++; i < n; i++) {
        if (p[i] == '\\') { *esc = true; i++; }
        else if (p[i] == '"') return i + 1;
    }
    return n;
}

/* After the value at i. */
static size_t tj_skip(const char *p, size_t n, size_t i) {
    bool esc;
    if (i >= n) return n;
    if (p[i] == '"') return tj_str_end(p, n, i, &esc);
    if (p[i] == '{' || p[i] == '[') {
        size_t depth = 0;
        while (i < n) {
            char ch = p[i];
            if (ch == '"') { i = tj_str_end(p, n, i, &esc); continue; }
            if (ch == '{' || ch == '[') depth++;
            else if ((ch == '}' || ch == ']') && --depth == 0) return i + 1;
            i++;
        }
        return n;
    }
    while (i < n && p[i] != ',' && p[i] != '}' && p[i] != ']' && !tj_ws(p[i])) i++;
    return i;
}

static int tj_hexv(char c) {
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static unsigned tj_hex(const char *s) {
    return (unsigned)(tj_hexv(s[0]) << 12 | tj_hexv(s[1]) << 8 | tj_hexv(s[2]) << 4 |
                      tj_hexv(s[3]));
}

/* Decodes the raw bytes of a checked string (between its quotes) into out (at most `raw`
 * bytes); returns the decoded length. */
static size_t tj_unescape(const char *s, size_t raw, char *out) {
    size_t o = 0;
    for (size_t k = 0; k < raw;) {
        char ch = s[k];
        if (ch != '\\') { out[o++] = ch; k++; continue; }
        char e = s[k + 1];
        k += 2;
        switch (e) {
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned long cp = tj_hex(s + k);
            k += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (tj_hex(s + k + 2) - 0xDC00);
                k += 6;
            }
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xC0 | cp >> 6);
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[o++] = (char)(0xE0 | cp >> 12);
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | cp >> 18);
                out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: out[o++] = e; break; /* " \ / */
        }
    }
    return o;
}

char tbx_tokj_kind(const tbx_tokj *t, size_t at) {
    if (!t || at == TBX_TOKJ_NONE || at >= t->n) return 0;
    char c = t->p[at];
    if (c == '-' || tj_digit(c)) return '0';
    return c;
}

bool tbx_tokj_next(const tbx_tokj *t, size_t *it, size_t *key, size_t *val) {
    const char *p = t->p;
    size_t n = t->n, i = *it;
    *key = *val = TBX_TOKJ_NONE;
    if (i >= n) return false;
    if (p[i] == '{' || p[i] == '[') {
        i = tj_skip_ws(p, n, i + 1); /* the first member or element, or the end */
    } else if (p[i] == ',') {
        i = tj_skip_ws(p, n, i + 1);
    } else {
        return false; /* the end of the container, or no container */
    }
    if (i >= n || p[i] == '}' || p[i] == ']') { *it = n; return false; }
    /* i: a key (in an object) or a value; which one the container tells, i.e. whether a ':'
     * follows a string here */
    bool esc;
    if (p[i] == '"') {
        size_t e = tj_str_end(p, n, i, &esc);
        size_t c = tj_skip_ws(p, n, e);
        if (c < n && p[c] == ':') {
            *key = i;
            i = tj_skip_ws(p, n, c + 1);
        }
    }
    *val = i;
    i = tj_skip_ws(p, n, tj_skip(p, n, i));
    *it = i; /* the ',' or the closing bracket */
    return true;
}

size_t tbx_tokj_count(const tbx_tokj *t, size_t at) {
    char k = tbx_tokj_kind(t, at);
    if (k != '{' && k != '[') return 0;
    size_t it = at, key, val, count = 0;
    while (tbx_tokj_next(t, &it, &key, &val)) count++;
    return count;
}

/* Is the key at `at` (its '"') the NUL-terminated `name`? */
static bool tj_key_is(const tbx_tokj *t, size_t at, const char *name) {
    bool esc;
    size_t end = tj_str_end(t->p, t->n, at, &esc), raw = end - at - 2, nl = strlen(name);
    if (!esc) return raw == nl && memcmp(t->p + at + 1, name, nl) == 0;
    char buf[256];
    if (raw > sizeof buf) return false; /* decodes to more than `name` can be */
    size_t l = tj_unescape(t->p + at + 1, raw, buf);
    return l == nl && memcmp(buf, name, nl) == 0;
}

size_t tbx_tokj_get(const tbx_tokj *t, size_t obj, const char *key) {
    if (tbx_tokj_kind(t, obj) != '{') return TBX_TOKJ_NONE;
    size_t it = obj, k, v;
    while (tbx_tokj_next(t, &it, &k, &v))
        if (tj_key_is(t, k, key)) return v;
    return TBX_TOKJ_NONE;
}

bool tbx_tokj_int(const tbx_tokj *t, size_t at, int64_t *v) {
    if (tbx_tokj_kind(t, at) != '0') return false;
    const char *p = t->p;
    size_t i = at, n = t->n;
    bool neg = p[i] == '-';
    if (neg) i++;
    uint64_t u = 0;
    for (; i < n && tj_digit(p[i]); i++) u = u * 10 + (uint64_t)(p[i] - '0');
    if (i < n && (p[i] == '.' || p[i] == 'e' || p[i] == 'E')) return false;
    /* checked: within signed 64 bits */
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    return true;
}

bool tbx_tokj_real(const tbx_tokj *t, size_t at, double *v) {
    if (tbx_tokj_kind(t, at) != '0') return false;
    /* the text was checked as JSON: a number of at most 63 bytes is copied and read (a longer
     * one has more digits than a double keeps, and is refused rather than cut) */
    char buf[64];
    size_t k = 0;
    for (size_t i = at; i < t->n && k < sizeof buf; i++) {
        char c = t->p[i];
        if (!tj_digit(c) && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E') break;
        buf[k++] = c;
    }
    if (k == sizeof buf) return false;
    buf[k] = 0;
    char *end = NULL;
    double d = strtod(buf, &end);
    if (end != buf + k || !isfinite(d)) return false;
    *v = d;
    return true;
}

bool tbx_tokj_true(const tbx_tokj *t, size_t at) { return tbx_tokj_kind(t, at) == 't'; }

const char *tbx_tokj_str(const tbx_tokj *t, size_t at, tbx_tokj_buf *b, size_t *len) {
    *len = 0;
    if (tbx_tokj_kind(t, at) != '"') return NULL;
    bool esc;
    size_t end = tj_str_end(t->p, t->n, at, &esc), raw = end - at - 2;
    if (!esc) {
        *len = raw;
        return t->p + at + 1;
    }
    if (!tbx_grow(b->al, (void **)&b->p, &b->cap, raw + 1, 1)) {
        *len = SIZE_MAX;
        return NULL;
    }
    *len = tj_unescape(t->p + at + 1, raw, b->p);
    b->p[*len] = 0;
    return b->p;
}

void tbx_tokj_buf_free(tbx_tokj_buf *b) {
    if (!b) return;
    if (b->p) tbx_free(b->al, b->p, b->cap);
    b->p = NULL;
    b->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* Decodes the member value at `val` (key at `key`) with jansson into obj under its key,
 * counting its text against TBX_TOKJ_SMALL_MAX. */
static tbx_status tj_small(tbx_tokj *t, json_t *obj, size_t key, size_t val, const char *where,
                           size_t *used, tbx_error *err) {
    size_t end = tj_skip(t->p, t->n, val);
    if (end - val > TBX_TOKJ_SMALL_MAX - *used)
        return tbx_err(err, TBX_E_LIMIT, val, t->name, "%s: %s is %zu bytes of JSON; the "
                       "settings read as a whole (normalizer, pre_tokenizer, post_processor, the model's "
                       "members but vocab and merges) may take %zu bytes in all", t->name,
                       where, end - val, TBX_TOKJ_SMALL_MAX);
    *used += end - val;
    tbx_tokj_buf kb = {t->al, NULL, 0};
    size_t kl;
    const char *k = tbx_tokj_str(t, key, &kb, &kl);
    char *kz = k ? tbx_memdup0(t->al, k, kl) : NULL;
    tbx_tokj_buf_free(&kb);
    if (!kz) return tbx_err_nomem(err, t->name);
    json_error_t je;
    json_t *v = json_loadb(t->p + val, end - val, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    tbx_status st = TBX_OK;
    if (!v) {
        /* checked text: only memory can fail */
        st = json_error_code(&je) == json_error_out_of_memory
                 ? tbx_err_nomem(err, t->name)
                 : tbx_err(err, TBX_E_FORMAT, val, t->name, "%s: %s: %s", t->name, where,
                           je.text);
    } else if (json_object_set_new(obj, kz, v) != 0) {
        st = tbx_err_nomem(err, t->name);
    }
    tbx_free(t->al, kz, kl + 1);
    return st;
}

tbx_status tbx_tokj_read(tbx_tokj *t, const tbx_alloc *al, const char *text, size_t n,
                         const char *name, tbx_error *err) {
    memset(t, 0, sizeof *t);
    t->al = al;
    t->p = text;
    t->n = n;
    t->name = name;
    t->vocab = t->merges = t->added = TBX_TOKJ_NONE;
    if (n > TBX_TOKJ_MAX_BYTES)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, name, "%s: %zu bytes; at most %zu are "
                       "read", name, n, (size_t)TBX_TOKJ_MAX_BYTES);
    tj_check c;
    memset(&c, 0, sizeof c);
    c.al = al;
    c.p = text;
    c.n = n;
    c.name = name;
    c.err = err;
    tbx_status st = tj_precount(&c);
    if (st == TBX_OK) st = tj_check_text(&c);
    while (c.depth) tj_pop(&c);
    tbx_free(al, c.lv, c.cap * sizeof *c.lv);
    tbx_free(al, c.keys, c.keys_cap);
    tbx_free(al, c.big, c.big_cap * sizeof *c.big);
    if (st != TBX_OK) return st;

    /* where the large members are; the settings decoded */
    t->small = json_object();
    json_t *model = NULL;
    if (!t->small) return tbx_err_nomem(err, name);
    size_t used = 0, it = tj_skip_ws(text, n, 0), key, val;
    while (st == TBX_OK && tbx_tokj_next(t, &it, &key, &val)) {
        if (tj_key_is(t, key, "added_tokens")) {
            t->added = val;
        } else if (tj_key_is(t, key, "pre_tokenizer") || tj_key_is(t, key, "post_processor") ||
                   tj_key_is(t, key, "normalizer")) {
            st = tj_small(t, t->small, key, val, tj_key_is(t, key, "pre_tokenizer")
                          ? "pre_tokenizer" : tj_key_is(t, key, "normalizer") ? "normalizer"
                          : "post_processor", &used, err);
        } else if (tj_key_is(t, key, "model") && text[val] == '{') {
            if (!model && (!(model = json_object()) ||
                           json_object_set_new(t->small, "model", model) != 0)) {
                st = tbx_err_nomem(err, name);
                break;
            }
            size_t mit = val, mk, mv;
            while (st == TBX_OK && tbx_tokj_next(t, &mit, &mk, &mv)) {
                if (tj_key_is(t, mk, "vocab")) t->vocab = mv;
                else if (tj_key_is(t, mk, "merges")) t->merges = mv;
                else st = tj_small(t, model, mk, mv, "a member of model", &used, err);
            }
        }
    }
    if (st != TBX_OK) tbx_tokj_free(t);
    return st;
}

void tbx_tokj_free(tbx_tokj *t) {
    if (!t) return;
    json_decref(t->small);
    t->small = NULL;
    t->vocab = t->merges = t->added = TBX_TOKJ_NONE;
}
