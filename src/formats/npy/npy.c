/*
 * npy.c - the .npy reader: the header parser (a strict reader of the Python literal numpy
 * writes, through the bounded cursor: no evaluation), the open of a .npy file, and the read
 * hooks the .npy and .npz rows share (byte swapping of big-endian arrays, the transposition of
 * Fortran-order arrays to row-major, deflated members through npz.c).
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
 *
 * A big-endian array ('>f4') is kept as it is stored and swapped on every read; a Fortran-order
 * array is reported with numpy's shape and read in row-major order (the values numpy.load
 * gives, element for element). Such an array's component is marked transformed
 * (tbx_component.xform): it reads through the driver, so no raw byte is ever served
 * untransformed (no maps, no kernel copies), while the other arrays of an archive are served
 * straight from the file.
 */
#include "npy_int.h"

#include <stdio.h>

#define NPY_CHUNK ((size_t)1 << 20)

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

void npy_close(tbx_file *f) {
    npy_state *s = f->drv_state;
    if (!s) return;
    if (s->zip) npz_zip_free(f, s->zip);
    tbx_free(&f->al, s->rec, (s->nrec ? s->nrec : 1) * sizeof *s->rec);
    tbx_file_uncharge(f, s->charged);
    tbx_free(&f->al, s, sizeof *s);
    f->drv_state = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* .npy files                                                                                  */
/* ------------------------------------------------------------------------------------------ */
bool npy_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    (void)file_size;
    return len >= NPY_MAGIC_LEN + 2 && memcmp(head, NPY_MAGIC, NPY_MAGIC_LEN) == 0;
}

tbx_status npy_open(tbx_file *f, tbx_error *err) {
    tbx_cursor c;
    tbx_status st = tbx_cursor_init(&c, &f->src, &f->al, 0, f->src.size, err);
    if (st != TBX_OK) return st;
    npy_hdr h;
    st = npy_parse_header(&c, 0, &f->limits, "", &h, err);
    tbx_cursor_free(&c);
    if (st != TBX_OK) return st;
    uint64_t end;
    if (!tbx_add_u64(h.data_off, h.nbytes, &end) || end > f->src.size)
        return tbx_err(err, TBX_E_TRUNCATED, h.data_off, "data",
                       "the array's %llu bytes run past the end of the file (%llu bytes)",
                       (unsigned long long)h.nbytes, (unsigned long long)f->src.size);
    if ((st = npy_state_new(f, 1, 0, err)) != TBX_OK) return st;
    f->version = h.major;
    tbx_tensor *t;
    if ((st = tbx_file_add_tensor(f, "arr_0", 5, h.dt->dtype, h.shape, h.ndim, 1, 0, &t, err)) !=
        TBX_OK)
        return st;
    tbx_comp_set_raw(t, h.dt->dtype, h.data_off, h.nbytes);
    npy_state *s = f->drv_state;
    npy_rec *r = &s->rec[0];
    r->data_off = h.data_off;
    r->zidx = -1;
    r->elem = h.dt->size;
    r->unit = h.big_endian ? h.dt->unit : 0;
    r->fortran = npy_hdr_transposed(&h);
    t->comp[0].xform = r->unit || r->fortran;
    if (end < f->src.size)
        return tbx_file_problem(f, err, TBX_E_FORMAT, end, "data",
                                "%llu bytes after the array's data (the array ends at byte %llu)",
                                (unsigned long long)(f->src.size - end), (unsigned long long)end);
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading through the driver: swapping, transposition, deflated members                      */
/* ------------------------------------------------------------------------------------------ */
static const npy_rec *rec_of(const tbx_file *f, const tbx_tensor *t) {
    const npy_state *s = f->drv_state;
    return &s->rec[t - f->tensors];
}

/* Bytes [pos, pos + len) of the array data as stored (row- or column-major). */
static tbx_status fetch(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t pos,
                        void *buf, size_t len, tbx_error *err) {
    if (len == 0) return TBX_OK;
    if (r->deflated) return npz_read_decoded(f, r, t->name, r->data_off + pos, buf, len, err);
    return tbx_source_read(&f->src, r->data_off + pos, buf, len, t->name, err);
}

static void swap_units(uint8_t *p, size_t nbytes, unsigned unit) {
    if (unit < 2) return;
    for (size_t i = 0; i + unit <= nbytes; i += unit)
        for (unsigned a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t tmp = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = tmp;
        }
}

/* Strides of a column-major (fs) and a row-major (cs) layout of the tensor's shape, elements. */
static void strides(const tbx_tensor *t, uint64_t *fs, uint64_t *cs) {
    const uint32_t n = t->ndim;
    uint64_t acc = 1;
    for (uint32_t d = 0; d < n; d++) { fs[d] = acc; acc *= t->shape[d]; }
    acc = 1;
    for (uint32_t d = n; d-- > 0;) { cs[d] = acc; acc *= t->shape[d]; }
}

/* Elements [e, e + n) in row-major order of a column-major array whose stored bytes are all
 * at `base` (a mapping or memory), into dst. */
static void gather(const tbx_tensor *t, unsigned elem, const uint8_t *base, uint64_t e,
                   uint64_t n, uint8_t *dst) {
    uint64_t fs[NPY_MAX_DIM], cs[NPY_MAX_DIM], idx[NPY_MAX_DIM];
    strides(t, fs, cs);
    const uint32_t nd = t->ndim;
    uint64_t foff = 0, rem = e;
    for (uint32_t d = 0; d < nd; d++) {
        idx[d] = rem / cs[d];
        rem %= cs[d];
        foff += idx[d] * fs[d];
    }
    for (uint64_t i = 0; i < n; i++, dst += elem) {
        memcpy(dst, base + foff * elem, elem);
        uint32_t k = nd - 1;
        idx[k]++;
        foff += fs[k];
        while (k > 0 && idx[k] == t->shape[k]) {
            foff -= t->shape[k] * fs[k];
            idx[k] = 0;
            k--;
            idx[k]++;
            foff += fs[k];
        }
    }
}

/* Elements [e, e + n) in row-major order of a column-major array, by one pass over its stored
 * bytes (a deflated member, a callback source): each element read in stored order lands at its
 * row-major place when it is inside the range. */
static tbx_status scatter_pass(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t e,
                               uint64_t n, uint8_t *dst, tbx_error *err) {
    uint64_t fs[NPY_MAX_DIM], cs[NPY_MAX_DIM], idx[NPY_MAX_DIM];
    strides(t, fs, cs);
    const uint32_t nd = t->ndim;
    const unsigned elem = r->elem;
    memset(idx, 0, nd * sizeof idx[0]);
    uint8_t *chunk = tbx_malloc(&f->al, NPY_CHUNK);
    if (!chunk) return tbx_err_nomem(err, "transposition buffer");
    const uint64_t total = t->nelems, per = NPY_CHUNK / elem;
    uint64_t cidx = 0, done = 0;
    tbx_status st = TBX_OK;
    for (uint64_t f0 = 0; f0 < total && st == TBX_OK && done < n; f0 += per) {
        uint64_t m = total - f0 < per ? total - f0 : per;
        st = fetch(f, t, r, f0 * elem, chunk, (size_t)(m * elem), err);
        for (uint64_t i = 0; i < m && st == TBX_OK; i++) {
            if (cidx >= e && cidx - e < n) {
                memcpy(dst + (cidx - e) * elem, chunk + i * elem, elem);
                done++;
            }
            uint32_t k = 0;
            idx[0]++;
            cidx += cs[0];
            while (k + 1 < nd && idx[k] == t->shape[k]) {
                cidx -= t->shape[k] * cs[k];
                idx[k] = 0;
                k++;
                idx[k]++;
                cidx += cs[k];
            }
        }
    }
    tbx_free(&f->al, chunk, NPY_CHUNK);
    return st;
}

/* Elements [e, e + n) of the tensor in row-major order, little-endian, into dst. */
static tbx_status read_elems(tbx_file *f, const tbx_tensor *t, const npy_rec *r, uint64_t e,
                             uint64_t n, uint8_t *dst, tbx_error *err) {
    const unsigned elem = r->elem;
    tbx_status st = TBX_OK;
    if (n == 0) return TBX_OK;
    if (!r->fortran) {
        st = fetch(f, t, r, e * elem, dst, (size_t)(n * elem), err);
    } else if (!r->deflated) {
        tbx_view v;
        const uint64_t nbytes = t->comp[0].nbytes;
        const uint8_t *p = tbx_source_view(&f->src, r->data_off, nbytes, &v);
        if (p) {
            gather(t, elem, p, e, n, dst);
            st = tbx_view_check(&v, r->data_off, nbytes, t->name, err);
            tbx_view_release(&v);
        } else {
            st = scatter_pass(f, t, r, e, n, dst, err);
        }
    } else {
        st = scatter_pass(f, t, r, e, n, dst, err);
    }
    if (st == TBX_OK) swap_units(dst, (size_t)(n * elem), r->unit);
    return st;
}

/* A pending check (TBX_OPEN_VERIFY_DIGESTS) of a member not yet verified. */
static tbx_status verify_once(tbx_file *f, const tbx_tensor *t, const npy_rec *r,
                              tbx_error *err) {
    const npy_state *s = f->drv_state;
    if (r->zidx < 0 || !s->verify || atomic_load(&r->verified)) return TBX_OK;
    tbx_status st = r->deflated ? npz_check_deflated(f, r, t->name, err)
                                : npz_check_stored(f, r, t->name, err);
    if (st == TBX_OK) atomic_store(&((npy_rec *)r)->verified, 1);
    return st;
}

tbx_status npy_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                              tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    tbx_status st = verify_once(f, t, r, err);
    if (st != TBX_OK) return st;
    const uint64_t nbytes = t->comp[0].nbytes;
    if (nbytes > SIZE_MAX) return tbx_err(err, TBX_E_OVERFLOW, t->comp[0].offset, t->name, "too large");
    return read_elems(f, t, r, 0, r->elem ? nbytes / r->elem : 0, buf, err);
}

tbx_status npy_read_component_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos,
                                    void *buf, size_t len, tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    tbx_status st = verify_once(f, t, r, err);
    if (st != TBX_OK || len == 0) return st;
    if (!r->fortran && !r->unit) return fetch(f, t, r, pos, buf, len, err);
    const unsigned elem = r->elem;
    uint8_t *out = buf, tmp[16];
    uint64_t e = pos / elem;
    size_t head = (size_t)(pos % elem), left = len;
    if (head) {
        if ((st = read_elems(f, t, r, e, 1, tmp, err)) != TBX_OK) return st;
        size_t n = elem - head < left ? elem - head : left;
        memcpy(out, tmp + head, n);
        out += n;
        left -= n;
        e++;
    }
    uint64_t whole = left / elem;
    if (whole) {
        if ((st = read_elems(f, t, r, e, whole, out, err)) != TBX_OK) return st;
        out += whole * elem;
        left -= (size_t)(whole * elem);
        e += whole;
    }
    if (left) {
        if ((st = read_elems(f, t, r, e, 1, tmp, err)) != TBX_OK) return st;
        memcpy(out, tmp, left);
    }
    return TBX_OK;
}

bool npy_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c) {
    (void)c;
    const npy_state *s = f->drv_state;
    const npy_rec *r = rec_of(f, t);
    return s && s->verify && r->zidx >= 0 && !r->deflated && !atomic_load(&r->verified);
}

tbx_status npy_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err) {
    (void)c;
    const npy_rec *r = rec_of(f, t);
    if (r->zidx < 0) return TBX_OK;
    if (atomic_load(&r->verified)) return TBX_OK;
    tbx_status st = r->deflated ? npz_check_deflated(f, r, t->name, err)
                                : npz_check_stored(f, r, t->name, err);
    if (st == TBX_OK) atomic_store(&((npy_rec *)r)->verified, 1);
    return st;
}
