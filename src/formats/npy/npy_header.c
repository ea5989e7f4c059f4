/*
 * npy_header.c - what both NumPy readers share (npy.c for .npy files, npz.c for the members of an
 * archive): the .npy header parser (a strict reader of the Python literal numpy writes, through
 * the bounded cursor: no evaluation) and the reader state (the records of the read hooks).
 *
 * The header is the text of a Python dict with exactly three keys (docs/formats/npy.md):
 *
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *
 * accepted as numpy's own writer and Python's literal syntax allow it: either quote, spaces,
 * tabs and newlines between tokens, keys in any order, a trailing comma, the 'L' suffix Python 2
 * put on integers (v1.0 and v2.0 only). Refused with the field and byte offset: anything else
 * (expressions, escapes, comments, duplicate or missing keys, negative or non-integer
 * dimensions), and, as TBX_E_UNSUPPORTED naming the descr, the dtypes tbx has no type for:
 * object arrays, structured and subarray dtypes, strings, datetimes, long double.
 */
#include "npy_int.h"

#include <stdio.h>
/* ------------------------------------------------------------------------------------------ */
/* The header parser                                                                           */
/* ------------------------------------------------------------------------------------------ */
typedef struct lex {
    tbx_cursor *c;
    uint64_t end;     /* end of the header text */
    int ch;           /* current byte, -1 past the end */
    uint64_t at;      /* its offset */
    const char *where;
    bool py2;         /* v1.0 / v2.0: Python 2's 'L' integer suffix is allowed */
    tbx_error *err;
} lex;

static tbx_status lx_next(lex *x) {
    if (x->c->pos >= x->end) {
        x->ch = -1;
        x->at = x->end;
        return TBX_OK;
    }
    x->at = x->c->pos;
    uint8_t b;
    tbx_status st = tbx_cur_u8(x->c, &b, "header", x->err);
    if (st != TBX_OK) return st;
    x->ch = b;
    return TBX_OK;
}

static bool lx_space(int ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static tbx_status lx_ws(lex *x) {
    while (lx_space(x->ch)) {
        tbx_status st = lx_next(x);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

static void lx_show(char *dst, size_t cap, int ch) {
    if (ch < 0) snprintf(dst, cap, "the end of the header");
    else if (ch >= 0x21 && ch < 0x7f) snprintf(dst, cap, "'%c'", ch);
    else snprintf(dst, cap, "byte 0x%02x", (unsigned)ch);
}

static tbx_status lx_bad(lex *x, const char *field, const char *expected) {
    char got[32];
    lx_show(got, sizeof got, x->ch);
    return tbx_err(x->err, TBX_E_FORMAT, x->at, field, "%s%s: expected %s, found %s", x->where,
                   field, expected, got);
}

static tbx_status lx_expect(lex *x, int ch, const char *field, const char *expected) {
    tbx_status st = lx_ws(x);
    if (st != TBX_OK) return st;
    if (x->ch != ch) return lx_bad(x, field, expected);
    return lx_next(x);
}

/* A string literal without escapes; its text (up to cap - 1 bytes, *len the full length). */
static tbx_status lx_string(lex *x, const char *field, char *buf, size_t cap, size_t *len) {
    const int q = x->ch;
    const uint64_t start = x->at;
    size_t n = 0;
    tbx_status st = lx_next(x);
    while (st == TBX_OK && x->ch != q) {
        if (x->ch < 0 || x->ch == '\n' || x->ch == '\r')
            return tbx_err(x->err, TBX_E_FORMAT, start, field, "%s%s: unterminated string",
                           x->where, field);
        if (x->ch == '\\')
            return tbx_err(x->err, TBX_E_FORMAT, x->at, field,
                           "%s%s: escape sequences are not part of numpy's header", x->where,
                           field);
        if (n + 1 < cap) buf[n] = (char)x->ch;
        n++;
        st = lx_next(x);
    }
    if (st != TBX_OK) return st;
    buf[n < cap ? n : cap - 1] = '\0';
    *len = n;
    return lx_next(x); /* the closing quote */
}

/* A bare word (True, False, ...): its letters into buf. */
static tbx_status lx_word(lex *x, char *buf, size_t cap) {
    size_t n = 0;
    tbx_status st = TBX_OK;
    while (st == TBX_OK && ((x->ch >= 'a' && x->ch <= 'z') || (x->ch >= 'A' && x->ch <= 'Z') ||
                            (x->ch >= '0' && x->ch <= '9') || x->ch == '_')) {
        if (n + 1 < cap) buf[n++] = (char)x->ch;
        st = lx_next(x);
    }
    buf[n] = '\0';
    return st;
}

/* A non-negative decimal integer (shape dimensions). */
static tbx_status lx_uint(lex *x, uint64_t *out) {
    const uint64_t start = x->at;
    if (x->ch == '-' || x->ch == '+')
        return tbx_err(x->err, TBX_E_FORMAT, start, "header.shape",
                       "%sheader.shape: a dimension must be a non-negative integer without sign",
                       x->where);
    if (x->ch < '0' || x->ch > '9') return lx_bad(x, "header.shape", "a dimension (an integer)");
    uint64_t v = 0;
    size_t digits = 0;
    bool lead0 = x->ch == '0';
    tbx_status st = TBX_OK;
    while (st == TBX_OK && x->ch >= '0' && x->ch <= '9') {
        if (!tbx_mul_u64(v, 10, &v) || !tbx_add_u64(v, (uint64_t)(x->ch - '0'), &v))
            return tbx_err(x->err, TBX_E_OVERFLOW, start, "header.shape",
                           "%sheader.shape: a dimension does not fit in 64 bits", x->where);
        digits++;
        st = lx_next(x);
    }
    if (st != TBX_OK) return st;
    if (lead0 && digits > 1)
        return tbx_err(x->err, TBX_E_FORMAT, start, "header.shape",
                       "%sheader.shape: a dimension with a leading zero is not a Python integer",
                       x->where);
    if (x->py2 && (x->ch == 'L' || x->ch == 'l')) st = lx_next(x);
    if (st != TBX_OK) return st;
    if ((x->ch >= 'a' && x->ch <= 'z') || (x->ch >= 'A' && x->ch <= 'Z') || x->ch == '_' ||
        x->ch == '.')
        return lx_bad(x, "header.shape", "',' or ')' after a dimension");
    *out = v;
    return TBX_OK;
}

static tbx_status parse_shape(lex *x, const tbx_limits *lim, npy_hdr *h) {
    const uint64_t open = x->at;
    tbx_status st;
    if (x->ch == '[')
        return tbx_err(x->err, TBX_E_FORMAT, open, "header.shape",
                       "%sheader.shape: a list, not a tuple", x->where);
    if (x->ch != '(') return lx_bad(x, "header.shape", "a tuple of integers");
    if ((st = lx_next(x)) != TBX_OK || (st = lx_ws(x)) != TBX_OK) return st;
    h->ndim = 0;
    bool comma = false;
    while (x->ch != ')') {
        if (h->ndim >= NPY_MAX_DIM || h->ndim >= lim->max_ndim)
            return tbx_err(x->err, TBX_E_LIMIT, x->at, "header.shape",
                           "%sheader.shape: more than %u dimensions", x->where,
                           lim->max_ndim < NPY_MAX_DIM ? lim->max_ndim : NPY_MAX_DIM);
        if ((st = lx_uint(x, &h->shape[h->ndim])) != TBX_OK) return st;
        h->ndim++;
        comma = false;
        if ((st = lx_ws(x)) != TBX_OK) return st;
        if (x->ch == ',') {
            comma = true;
            if ((st = lx_next(x)) != TBX_OK || (st = lx_ws(x)) != TBX_OK) return st;
        } else if (x->ch != ')') {
            return lx_bad(x, "header.shape", "',' or ')'");
        }
    }
    if (h->ndim == 1 && !comma)
        return tbx_err(x->err, TBX_E_FORMAT, open, "header.shape",
                       "%sheader.shape: (n) is an integer in Python, not a tuple: write (n,)",
                       x->where);
    return lx_next(x);
}

static tbx_status parse_descr(lex *x, npy_hdr *h) {
    const uint64_t at = x->at;
    tbx_status st;
    if (x->ch == '[')
        return tbx_err(x->err, TBX_E_UNSUPPORTED, at, "header.descr",
                       "%sheader.descr: a structured dtype (a list of fields) has no tbx dtype",
                       x->where);
    if (x->ch == '(')
        return tbx_err(x->err, TBX_E_UNSUPPORTED, at, "header.descr",
                       "%sheader.descr: a subarray dtype (a tuple) has no tbx dtype", x->where);
    if (x->ch != '\'' && x->ch != '"') return lx_bad(x, "header.descr", "a dtype string");
    char s[24];
    size_t n;
    if ((st = lx_string(x, "header.descr", s, sizeof s, &n)) != TBX_OK) return st;
    if (n >= sizeof s)
        return tbx_err(x->err, TBX_E_UNSUPPORTED, at, "header.descr",
                       "%sheader.descr: a %zu-byte descriptor is not one of numpy's simple dtypes",
                       x->where, n);
    const char *p = s;
    char order = '=';
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=') order = *p++;
    char kind = *p ? *p++ : '\0';
    unsigned size = 0;
    bool digits = false;
    for (; *p >= '0' && *p <= '9' && size < 1000; p++) {
        size = size * 10 + (unsigned)(*p - '0');
        digits = true;
    }
    const char *what = NULL;
    switch (kind) {
    case 'O': what = "an object array (pickled Python objects)"; break;
    case 'V': what = "a void or structured dtype"; break;
    case 'S': case 'a': what = "a byte-string dtype"; break;
    case 'U': what = "a unicode-string dtype"; break;
    case 'M': case 'm': what = "a datetime dtype"; break;
    default: break;
    }
    if (what)
        return tbx_err(x->err, TBX_E_UNSUPPORTED, at, "header.descr",
                       "%sheader.descr '%s': %s has no tbx dtype", x->where, s, what);
    if (!digits || *p != '\0' || !strchr("buifc", kind ? kind : '#'))
        return tbx_err(x->err, TBX_E_FORMAT, at, "header.descr",
                       "%sheader.descr '%s' is not a numpy dtype string (byte order, kind, size)",
                       x->where, s);
    h->dt = npy_dtype_of_kind(kind, size);
    if (!h->dt)
        return tbx_err(x->err, TBX_E_UNSUPPORTED, at, "header.descr",
                       "%sheader.descr '%s': tbx has no %u-byte %s type%s", x->where, s, size,
                       kind == 'b' ? "bool" : kind == 'i' ? "signed integer" :
                       kind == 'u' ? "unsigned integer" : kind == 'f' ? "float" : "complex",
                       (kind == 'f' && size > 8) || (kind == 'c' && size > 16)
                           ? " (long double)" : "");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    h->big_endian = order != '<';
#else
    h->big_endian = order == '>';
#endif
    if (h->dt->size == 1) h->big_endian = false;
    return TBX_OK;
}

tbx_status npy_parse_header(tbx_cursor *c, uint64_t base, const tbx_limits *lim,
                            const char *where, npy_hdr *h, tbx_error *err) {
    memset(h, 0, sizeof *h);
    uint8_t pre[NPY_PREAMBLE];
    tbx_status st = tbx_cur_seek(c, base, "magic", err);
    if (st == TBX_OK) st = tbx_cur_bytes(c, pre, NPY_MAGIC_LEN, "magic", err);
    if (st != TBX_OK) return st;
    if (memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return tbx_err(err, TBX_E_BAD_MAGIC, base, "magic",
                       "%sno .npy magic (\\x93NUMPY)", where);
    if ((st = tbx_cur_u8(c, &h->major, "version", err)) != TBX_OK ||
        (st = tbx_cur_u8(c, &h->minor, "version", err)) != TBX_OK)
        return st;
    if (h->major < 1 || h->major > 3 || h->minor != 0)
        return tbx_err(err, TBX_E_BAD_VERSION, base + 6, "version",
                       "%s.npy format version %u.%u (1.0, 2.0 and 3.0 are read)", where,
                       h->major, h->minor);
    uint64_t hlen;
    if (h->major == 1) {
        uint16_t v;
        if ((st = tbx_cur_u16(c, &v, "header_len", err)) != TBX_OK) return st;
        hlen = v;
    } else {
        uint32_t v;
        if ((st = tbx_cur_u32(c, &v, "header_len", err)) != TBX_OK) return st;
        hlen = v;
    }
    const uint64_t text = c->pos;
    if (hlen > lim->max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, base + 8, "header_len",
                       "%sheader_len %llu exceeds the limit of %llu bytes", where,
                       (unsigned long long)hlen, (unsigned long long)lim->max_header_bytes);
    if (hlen > tbx_cursor_remaining(c))
        return tbx_err(err, TBX_E_TRUNCATED, base + 8, "header_len",
                       "%sheader_len %llu runs past the end (%llu bytes left)", where,
                       (unsigned long long)hlen, (unsigned long long)tbx_cursor_remaining(c));
    h->data_off = text + hlen - base;

    lex x = {.c = c, .end = text + hlen, .where = where, .py2 = h->major < 3, .err = err};
    if ((st = lx_next(&x)) != TBX_OK || (st = lx_expect(&x, '{', "header", "'{'")) != TBX_OK)
        return st;
    enum { K_DESCR = 1, K_FORTRAN = 2, K_SHAPE = 4 };
    unsigned seen = 0;
    for (;;) {
        if ((st = lx_ws(&x)) != TBX_OK) return st;
        if (x.ch == '}') break;
        if (x.ch != '\'' && x.ch != '"') return lx_bad(&x, "header", "a key string or '}'");
        const uint64_t kat = x.at;
        char key[16];
        size_t kn;
        if ((st = lx_string(&x, "header", key, sizeof key, &kn)) != TBX_OK) return st;
        unsigned k = kn >= sizeof key                   ? 0
                     : strcmp(key, "descr") == 0         ? K_DESCR
                     : strcmp(key, "fortran_order") == 0 ? K_FORTRAN
                     : strcmp(key, "shape") == 0         ? K_SHAPE
                                                         : 0;
        if (!k)
            return tbx_err(err, TBX_E_FORMAT, kat, "header",
                           "%sheader: unknown key '%.15s%s' (descr, fortran_order and shape only)",
                           where, key, kn >= sizeof key ? "..." : "");
        if (seen & k)
            return tbx_err(err, TBX_E_DUPLICATE, kat, "header", "%sheader: key '%s' given twice",
                           where, key);
        seen |= k;
        if ((st = lx_expect(&x, ':', "header", "':' after a key")) != TBX_OK ||
            (st = lx_ws(&x)) != TBX_OK)
            return st;
        if (k == K_DESCR) {
            st = parse_descr(&x, h);
        } else if (k == K_SHAPE) {
            st = parse_shape(&x, lim, h);
        } else {
            const uint64_t vat = x.at;
            char w[8];
            if ((st = lx_word(&x, w, sizeof w)) != TBX_OK) return st;
            if (strcmp(w, "True") == 0) h->fortran = true;
            else if (strcmp(w, "False") == 0) h->fortran = false;
            else
                return tbx_err(err, TBX_E_FORMAT, vat, "header.fortran_order",
                               "%sheader.fortran_order: expected True or False", where);
        }
        if (st != TBX_OK) return st;
        if ((st = lx_ws(&x)) != TBX_OK) return st;
        if (x.ch == ',') {
            if ((st = lx_next(&x)) != TBX_OK) return st;
        } else if (x.ch != '}') {
            return lx_bad(&x, "header", "',' or '}'");
        }
    }
    const uint64_t close = x.at;
    if ((st = lx_next(&x)) != TBX_OK || (st = lx_ws(&x)) != TBX_OK) return st;
    if (x.ch >= 0) return lx_bad(&x, "header", "only white space after the dict");
    static const char *const names[] = {"descr", "fortran_order", "shape"};
    for (unsigned b = 0; b < 3; b++)
        if (!(seen & (1u << b)))
            return tbx_err(err, TBX_E_FORMAT, close, "header", "%sheader: no '%s' key", where,
                           names[b]);
    h->nelems = 1;
    for (uint32_t d = 0; d < h->ndim; d++)
        if (!tbx_mul_u64(h->nelems, h->shape[d], &h->nelems))
            return tbx_err(err, TBX_E_OVERFLOW, text, "header.shape",
                           "%sheader.shape: the element count overflows 64 bits", where);
    if (!tbx_mul_u64(h->nelems, h->dt->size, &h->nbytes))
        return tbx_err(err, TBX_E_OVERFLOW, text, "header.shape",
                       "%sheader.shape: the byte size overflows 64 bits", where);
    if (h->nbytes > lim->max_tensor_bytes)
        return tbx_err(err, TBX_E_LIMIT, text, "header.shape",
                       "%sheader.shape: %llu bytes of data exceed max_tensor_bytes (%llu)", where,
                       (unsigned long long)h->nbytes, (unsigned long long)lim->max_tensor_bytes);
    return TBX_OK;
}

/* Is a Fortran-order array of this shape laid out differently from C order (two or more
 * dimensions above 1, and not empty)? */
bool npy_hdr_transposed(const npy_hdr *h) {
    if (!h->fortran || h->nelems == 0) return false;
    unsigned big = 0;
    for (uint32_t d = 0; d < h->ndim; d++) big += h->shape[d] > 1;
    return big >= 2;
}

/* ------------------------------------------------------------------------------------------ */
/* The state shared by both rows                                                               */
/* ------------------------------------------------------------------------------------------ */
tbx_status npy_state_new(tbx_file *f, size_t n, uint64_t offset, tbx_error *err) {
    uint64_t bytes = sizeof(npy_state) + (uint64_t)n * sizeof(npy_rec) + 2 * TBX_HEAP_OVERHEAD;
    tbx_status st = tbx_file_charge(f, bytes, offset, "tensors", err);
    if (st != TBX_OK) return st;
    npy_state *s = tbx_malloc(&f->al, sizeof *s);
    if (!s) return tbx_err_nomem(err, "npy state");
    memset(s, 0, sizeof *s);
    s->rec = tbx_calloc(&f->al, n ? n : 1, sizeof *s->rec);
    if (!s->rec) {
        tbx_free(&f->al, s, sizeof *s);
        return tbx_err_nomem(err, "npy tensor records");
    }
    s->nrec = n;
    s->charged = bytes;
    s->verify = (f->flags & TBX_OPEN_VERIFY_DIGESTS) != 0;
    f->drv_state = s;
    return TBX_OK;
}
