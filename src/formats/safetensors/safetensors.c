/*
 * safetensors.c - the safetensors driver (Hugging Face's container, PyPI `safetensors`).
 *
 * A safetensors file is an 8-byte little-endian header length N, then N bytes of UTF-8 JSON
 * (an object, starting with '{', padded with trailing spaces), then one data section that the
 * tensors tile exactly, back to back, in any order the header chooses:
 *
 *   offset 0        8                          8+N                                  file end
 *          +--------+--------------------------+-------------------------------------+
 *          | u64 N  | {"__metadata__":{...},   | tensor bytes: [begin, end) of each  |
 *          |  (LE)  |  "name":{"dtype":"F32",  | entry, relative to byte 8+N; sorted |
 *          |        |   "shape":[2,3],         | by begin they cover [0, D) with no  |
 *          |        |   "data_offsets":[b,e]}, | hole and no overlap, 8+N+D = size   |
 *          |        |  ...}     (space padding)|                                     |
 *          +--------+--------------------------+-------------------------------------+
 *
 * Each entry gives a dtype name (BOOL, F4, F6_E2M3, ..., U64), a row-major shape of non-negative
 * integers, and data_offsets; its byte size is numel x bits / 8 and must be a whole number of
 * bytes. The optional "__metadata__" entry is a map of string -> string.
 *
 * Reading is strict (see docs/formats/safetensors.md for every rule and decision): the header is
 * checked against 100,000,000 bytes, the limits and the file size before it is allocated, walked
 * member by member (this driver splits the top-level object, jansson decodes each key and value
 * on its own, so no tree of the whole header is ever built) with duplicate keys rejected, then
 * every entry is checked and the tiling verified. Tensors are reported in file order, i.e. by
 * ascending data offset.
 *
 * Writing reproduces the reference serializer byte for byte: tensors ordered by descending dtype
 * rank (the reference's dtype enum order, which groups by alignment) then by name, compact JSON
 * with "__metadata__" first, keys "dtype", "shape", "data_offsets", the reference's string
 * escaping, and space padding of the header to a multiple of 8.
 */
#include "io.h"
#include "safetensors_int.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull /* the reference's MAX_HEADER_SIZE */
#define ST_DIM_MAX ((uint64_t)INT64_MAX) /* largest integer jansson (and so tensorbox) reads */

/* ------------------------------------------------------------------------------------------ */
/* dtypes: in the reference's enum order (the writer sorts by this rank, descending)           */
/* ------------------------------------------------------------------------------------------ */
typedef struct st_dtype {
    const char *name;
    tbx_dtype dtype;
    uint32_t bits;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"BOOL", TBX_DT_BOOL, 8},
    {"F4", TBX_DT_F4_E2M1, 4},
    {"F6_E2M3", TBX_DT_F6_E2M3, 6},
    {"F6_E3M2", TBX_DT_F6_E3M2, 6},
    {"U8", TBX_DT_U8, 8},
    {"I8", TBX_DT_I8, 8},
    {"F8_E5M2", TBX_DT_F8_E5M2, 8},
    {"F8_E4M3", TBX_DT_F8_E4M3, 8},
    {"F8_E8M0", TBX_DT_F8_E8M0, 8},
    {"F8_E4M3FNUZ", TBX_DT_F8_E4M3FNUZ, 8},
    {"F8_E5M2FNUZ", TBX_DT_F8_E5M2FNUZ, 8},
    {"I16", TBX_DT_I16, 16},
    {"U16", TBX_DT_U16, 16},
    {"F16", TBX_DT_F16, 16},
    {"BF16", TBX_DT_BF16, 16},
    {"I32", TBX_DT_I32, 32},
    {"U32", TBX_DT_U32, 32},
    {"F32", TBX_DT_F32, 32},
    {"C64", TBX_DT_C64, 64},
    {"F64", TBX_DT_F64, 64},
    {"I64", TBX_DT_I64, 64},
    {"U64", TBX_DT_U64, 64},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static int st_rank_of_name(const char *s, size_t n) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (n && st_dtypes[i].name[0] == s[0] && strlen(st_dtypes[i].name) == n &&
            memcmp(st_dtypes[i].name, s, n) == 0)
            return i;
    return -1;
}

static int st_rank_of_dtype(tbx_dtype dt) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == dt) return i;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Locating things in the header text. jansson values carry no positions, so error offsets are */
/* found by walking the raw text, which jansson has already accepted as valid JSON. Every walk */
/* is bounds-checked anyway and answers "not found" on anything unexpected.                    */
/* ------------------------------------------------------------------------------------------ */
#define JS_NONE ST_JS_NONE
#define js_ws st_js_ws
#define js_skip_string st_js_skip_string
#define js_skip_value st_js_skip_value

/* What jansson's tree of an object costs per member besides the text: the hash pair with the
 * key, the string value node and its copy, a bucket (measured: about 180 bytes with glibc). */
#define ST_JS_MEMBER_COST 200u

/* Walks the members of the object at `obj` ('{'): keys[k] gets the index of member k's key
 * (its opening quote) and vals[k] the index of its value, for k < cap (either may be NULL).
 * Returns the number of members found. */
static size_t js_members(const char *p, size_t n, size_t obj, size_t *keys, size_t *vals,
                         size_t cap) {
    if (obj == JS_NONE || obj >= n || p[obj] != '{') return 0;
    size_t i = js_ws(p, n, obj + 1), k = 0;
    while (i < n && p[i] == '"') {
        size_t key = i;
        i = js_skip_string(p, n, i);
        if (i == JS_NONE) break;
        i = js_ws(p, n, i);
        if (i >= n || p[i] != ':') break;
        i = js_ws(p, n, i + 1);
        if (k < cap) {
            if (keys) keys[k] = key;
            if (vals) vals[k] = i;
        }
        k++;
        i = js_skip_value(p, n, i);
        if (i == JS_NONE) break;
        i = js_ws(p, n, i);
        if (i < n && p[i] == ',') i = js_ws(p, n, i + 1);
        else break;
    }
    return k;
}

/* Index of the value of member `key` (raw, unescaped text compare) of the object at `obj`. */
static size_t js_member(const char *p, size_t n, size_t obj, const char *key) {
    if (obj == JS_NONE || obj >= n || p[obj] != '{') return JS_NONE;
    size_t klen = strlen(key);
    size_t i = js_ws(p, n, obj + 1);
    while (i < n && p[i] == '"') {
        size_t ks = i + 1;
        i = js_skip_string(p, n, i);
        if (i == JS_NONE) return JS_NONE;
        bool match = (i - 1 - ks == klen) && memcmp(p + ks, key, klen) == 0;
        i = js_ws(p, n, i);
        if (i >= n || p[i] != ':') return JS_NONE;
        i = js_ws(p, n, i + 1);
        if (match) return i;
        i = js_skip_value(p, n, i);
        if (i == JS_NONE) return JS_NONE;
        i = js_ws(p, n, i);
        if (i < n && p[i] == ',') i = js_ws(p, n, i + 1);
        else break;
    }
    return JS_NONE;
}

/* Index of element `idx` of the array at `arr`. */
static size_t js_elem(const char *p, size_t n, size_t arr, size_t idx) {
    if (arr == JS_NONE || arr >= n || p[arr] != '[') return JS_NONE;
    size_t i = js_ws(p, n, arr + 1);
    for (size_t k = 0; i < n && p[i] != ']'; k++) {
        if (k == idx) return i;
        i = js_skip_value(p, n, i);
        if (i == JS_NONE) return JS_NONE;
        i = js_ws(p, n, i);
        if (i < n && p[i] == ',') i = js_ws(p, n, i + 1);
        else break;
    }
    return JS_NONE;
}

/* One pass over the raw header before jansson builds its tree (which costs a small multiple of
 * the header size): the deepest nesting of objects/arrays (the header object is depth 1) and the
 * number of top-level members. Works on any bytes (the text is not validated yet); *deep_at gets
 * the index of the first bracket deeper than `max_depth`, or JS_NONE. */
static void js_prescan(const char *p, size_t n, uint32_t max_depth, size_t *deep_at,
                       uint64_t *members) {
    size_t depth = 0;
    bool empty = true;
    *deep_at = JS_NONE;
    *members = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '"') {
            if (depth == 1 && empty) { empty = false; *members = 1; }
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\') i++;
        } else if (ch == '{' || ch == '[') {
            if (++depth > max_depth && *deep_at == JS_NONE) *deep_at = i;
        } else if (ch == '}' || ch == ']') {
            if (depth) depth--;
        } else if (ch == ',' && depth == 1) {
            (*members)++;
        }
    }
}

static const char *js_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Short rendering of a JSON scalar for messages ("-1", "1.5", "\"x\"", "array"). */
static void js_brief(char *dst, size_t cap, const json_t *v) {
    if (json_is_integer(v)) snprintf(dst, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(dst, cap, "%.17g (a real)", json_real_value(v));
    else if (json_is_string(v)) {
        char q[72];
        tbx_quote_bytes(q, sizeof q, json_string_value(v), json_string_length(v), 48);
        snprintf(dst, cap, "\"%s\"", q);
    } else snprintf(dst, cap, "%s", js_type_name(v));
}

/* "[3, 4]" from a JSON array of integers (already validated), truncated with "...". */
static void js_shape_str(char *dst, size_t cap, const json_t *arr) {
    size_t len = 0, n = json_array_size(arr);
    int w = snprintf(dst, cap, "[");
    len = w > 0 ? (size_t)w : 0;
    for (size_t i = 0; i < n && len < cap; i++) {
        if (len + 24 >= cap) { snprintf(dst + len, cap - len, "..."); len = strlen(dst); break; }
        w = snprintf(dst + len, cap - len, "%s%lld", i ? ", " : "",
                     (long long)json_integer_value(json_array_get(arr, i)));
        if (w > 0) len += (size_t)w;
    }
    if (len < cap) snprintf(dst + len, cap - len, "]");
}

/* ------------------------------------------------------------------------------------------ */
/* Probe                                                                                       */
/* ------------------------------------------------------------------------------------------ */
bool st_probe(const uint8_t *head, size_t len, uint64_t file_size) {
    if (len < 9 || file_size < 10) return false;
    uint64_t n = tbx_ld64(head);
    return n >= 2 && n <= file_size - 8 && head[8] == '{';
}

/* ------------------------------------------------------------------------------------------ */
/* Open                                                                                        */
/* ------------------------------------------------------------------------------------------ */
typedef struct st_ent {
    uint64_t begin, end;
    const char *name;   /* into st_ctx.names, set once every name is in */
    uint32_t name_off;  /* offset of the decoded name in st_ctx.names (< 2 x header) */
    uint32_t name_len;
    uint32_t dim_off;   /* the shape: st_ctx.dims[dim_off .. dim_off + ndim) */
    uint32_t ndim;
    uint32_t vpos;      /* text index of the entry (the header is < 100,000,000 bytes) */
    uint8_t rank;       /* index into st_dtypes */
    /* 48 bytes: with a million entries the table is alive next to the model being built; the
     * element count and byte size are recomputed from the shape and the offsets */
} st_ent;

typedef struct st_ctx {
    tbx_file *f;
    const tbx_source *src; /* the file being read: f->src, or a shard of a set */
    uint32_t src_idx;      /* its index for tbx_file_source */
    const st_shard_check *set; /* the set it is a shard of, NULL when it stands alone */
    const char *hdr;    /* the N header bytes */
    size_t n;
    /* the tensor table being built: entries, their decoded names and their dimensions */
    st_ent *ents;
    size_t nents, ents_cap;
    char *names;
    size_t names_len, names_cap;
    uint64_t *dims;
    size_t ndims, dims_cap;
    tbx_names index;    /* decoded names -> entry, for duplicate keys */
    uint64_t charged;   /* bytes of these tables charged to the handle's budget */
} st_ctx;

/* What the tables above cost per entry (the entry array may be twice the entries while it
 * grows; the index's slot) and per dimension, as charged to the handle's budget: they live
 * next to the model while it is built. */
#define ST_ENT_COST (2 * sizeof(st_ent) + 16)
#define ST_DIM_COST (2 * sizeof(uint64_t))

static tbx_status st_charge(st_ctx *c, uint64_t bytes, uint64_t at, const char *field,
                            tbx_error *err) {
    tbx_status st = tbx_file_charge(c->f, bytes, at, field, err);
    if (st == TBX_OK) c->charged += bytes;
    return st;
}

static void st_uncharge(st_ctx *c, uint64_t bytes) {
    if (bytes > c->charged) bytes = c->charged;
    tbx_file_uncharge(c->f, bytes);
    c->charged -= bytes;
}

/* Absolute file offset of header text index i (or of the header start when unknown). */
static uint64_t st_at(const st_ctx *c, size_t i) {
    return 8 + (uint64_t)(i == JS_NONE || i > c->n ? 0 : i);
}

/* Text index of field `key` of the entry at text index `ent`, falling back to the entry. */
static size_t st_field_at(const st_ctx *c, size_t ent, const char *key) {
    size_t v = js_member(c->hdr, c->n, ent, key);
    return v != JS_NONE ? v : ent;
}

static int st_ent_cmp(const void *a, const void *b) {
    const st_ent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    size_t m = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, m);
    if (r) return r;
    return x->name_len < y->name_len ? -1 : (x->name_len > y->name_len);
}

/* Reads a non-negative integer (JSON integer, 0 <= v <= 2^63-1). */
static bool st_uint(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t i = json_integer_value(v);
    if (i < 0) return false;
    *out = (uint64_t)i;
    return true;
}

static tbx_status st_parse_meta(st_ctx *c, const json_t *meta, size_t mat, tbx_error *err) {
    tbx_file *f = c->f;
    if (json_is_null(meta)) return TBX_OK; /* the reference reads null as "no metadata" */
    if (!json_is_object(meta))
        return tbx_err(err, TBX_E_FORMAT, st_at(c, mat), "header.__metadata__",
                       "__metadata__ must be an object of string values, got %s",
                       js_type_name(meta));
    size_t count = json_object_size(meta);
    if (count > f->limits.max_metadata_entries)
        return tbx_err(err, TBX_E_LIMIT, st_at(c, mat), "header.__metadata__",
                       "__metadata__ has %zu entries, more than max_metadata_entries = %" PRIu64,
                       count, f->limits.max_metadata_entries);
    /* Text positions of every key and value, in one walk (jansson keeps insertion order). */
    size_t cap = count ? count : 1;
    size_t *pos = tbx_calloc(&f->al, cap, 2 * sizeof *pos);
    if (!pos) return tbx_err_nomem(err, "safetensors metadata index");
    size_t found = js_members(c->hdr, c->n, mat, pos, pos + cap, cap);
    tbx_status st = TBX_OK;
    const char *key;
    size_t klen, k = 0;
    json_t *val;
    json_object_keylen_foreach((json_t *)meta, key, klen, val) {
        size_t kat = k < found ? pos[k] : mat, vat = k < found ? pos[cap + k] : mat;
        k++;
        char qb[96];
#define QKEY (tbx_quote_bytes(qb, sizeof qb, key, klen, 64), qb) /* only when an error is reported */
        if (klen > f->limits.max_string_len) {
            st = tbx_err(err, TBX_E_LIMIT, st_at(c, kat), "header.__metadata__",
                         "__metadata__ key \"%s\" of %zu bytes exceeds max_string_len = %" PRIu64,
                         QKEY, klen, f->limits.max_string_len);
            break;
        }
        if (!json_is_string(val)) {
            st = tbx_err(err, TBX_E_FORMAT, st_at(c, vat), "header.__metadata__",
                         "__metadata__ \"%s\": value must be a string, got %s", QKEY,
                         js_type_name(val));
            break;
        }
        size_t vlen = json_string_length(val);
        if (vlen > f->limits.max_string_len) {
            st = tbx_err(err, TBX_E_LIMIT, st_at(c, vat), "header.__metadata__",
                         "__metadata__ \"%s\": value of %zu bytes exceeds max_string_len = "
                         "%" PRIu64, QKEY, vlen, f->limits.max_string_len);
            break;
        }
        uint64_t had;
        if (c->set && tbx_names_find(&f->meta_names, key, klen, &had)) {
            /* a key an earlier shard gave: merged when the value is the same */
            const tbx_value *pv = f->meta[had].value;
            if (pv->type == TBX_V_STRING && pv->v.s.n == vlen &&
                memcmp(pv->v.s.p, json_string_value(val), vlen) == 0)
                continue;
            st = tbx_err(err, TBX_E_DUPLICATE, st_at(c, vat), "header.__metadata__",
                         "__metadata__ \"%s\": this shard's value differs from an earlier "
                         "shard's", QKEY);
            break;
        }
        tbx_value *v = tbx_val_string(&f->al, TBX_V_STRING, json_string_value(val), vlen);
        if (!v) { st = tbx_err_nomem(err, "safetensors metadata value"); break; }
        st = tbx_file_add_meta(f, key, klen, v, st_at(c, kat), err);
        if (st != TBX_OK) break;
    }
#undef QKEY
    tbx_free(&f->al, pos, cap * 2 * sizeof *pos);
    return st;
}

/* Error offsets inside an entry are looked up only when an error is reported. */
#define ST_FIELD(key) st_at(c, st_field_at(c, vpos, key))
#define ST_ELEM(key, i) st_at(c, js_elem(c->hdr, c->n, st_field_at(c, vpos, key), i))

/* Checks one tensor entry and fills *e (everything but the tiling). */
static tbx_status st_parse_entry(st_ctx *c, const char *name, size_t name_len, const json_t *v,
                                 size_t vpos, st_ent *e, tbx_error *err) {
    tbx_file *f = c->f;
    char qb[96], b[96], shb[80];
    /* name and shape are rendered only when an error is reported */
#define ST_NAME (tbx_quote_bytes(qb, sizeof qb, name, name_len, 64), qb)
#define ST_SHAPE (js_shape_str(shb, sizeof shb, sh), shb)
    uint64_t eat = st_at(c, vpos);
    if (name_len > f->limits.max_string_len)
        return tbx_err(err, TBX_E_LIMIT, eat, "tensor.name",
                       "tensor name \"%s\" of %zu bytes exceeds max_string_len = %" PRIu64, ST_NAME,
                       name_len, f->limits.max_string_len);
    if (!json_is_object(v))
        return tbx_err(err, TBX_E_FORMAT, eat, "tensor",
                       "tensor \"%s\": entry must be an object with dtype, shape and "
                       "data_offsets, got %s", ST_NAME, js_type_name(v));
    e->vpos = vpos;

    /* dtype */
    const json_t *dt = json_object_get(v, "dtype");
    if (!dt)
        return tbx_err(err, TBX_E_FORMAT, eat, "tensor.dtype",
                       "tensor \"%s\": missing field \"dtype\"", ST_NAME);
    if (!json_is_string(dt))
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("dtype"), "tensor.dtype",
                       "tensor \"%s\": dtype must be a string, got %s", ST_NAME, js_type_name(dt));
    int rank = st_rank_of_name(json_string_value(dt), json_string_length(dt));
    if (rank < 0) {
        js_brief(b, sizeof b, dt);
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("dtype"), "tensor.dtype",
                       "tensor \"%s\": unknown dtype %s", ST_NAME, b);
    }
    e->rank = (uint8_t)rank;
    const st_dtype *d = &st_dtypes[rank];

    /* shape */
    const json_t *sh = json_object_get(v, "shape");
    if (!sh)
        return tbx_err(err, TBX_E_FORMAT, eat, "tensor.shape",
                       "tensor \"%s\": missing field \"shape\"", ST_NAME);
    if (!json_is_array(sh))
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("shape"), "tensor.shape",
                       "tensor \"%s\": shape must be an array of integers, got %s", ST_NAME,
                       js_type_name(sh));
    size_t ndim = json_array_size(sh);
    if (ndim > f->limits.max_ndim || ndim > f->limits.max_array_len)
        return tbx_err(err, TBX_E_LIMIT, ST_FIELD("shape"), "tensor.shape",
                       "tensor \"%s\": shape has %zu dimensions, more than max_ndim = %u",
                       ST_NAME, ndim, f->limits.max_ndim);
    for (size_t i = 0; i < ndim; i++) {
        const json_t *x = json_array_get(sh, i);
        uint64_t dim;
        if (!st_uint(x, &dim)) {
            js_brief(b, sizeof b, x);
            return tbx_err(err, TBX_E_FORMAT, ST_ELEM("shape", i), "tensor.shape",
                           "tensor \"%s\": shape[%zu] must be a non-negative integer, got %s",
                           ST_NAME, i, b);
        }
    }
    /* kept as plain integers: the jansson value is freed after this entry */
    if (!tbx_grow(&f->al, (void **)&c->dims, &c->dims_cap, c->ndims + ndim, sizeof *c->dims))
        return tbx_err_nomem(err, "safetensors shapes");
    e->dim_off = (uint32_t)c->ndims;
    e->ndim = (uint32_t)ndim;
    for (size_t i = 0; i < ndim; i++)
        c->dims[c->ndims++] = (uint64_t)json_integer_value(json_array_get(sh, i));
    /* The running product is checked at every step, as the reference's checked fold does: a
     * later zero dimension does not excuse an overflowing prefix. */
    uint64_t nelems = 1;
    for (size_t i = 0; i < ndim; i++)
        if (!tbx_mul_u64(nelems, (uint64_t)json_integer_value(json_array_get(sh, i)), &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, ST_FIELD("shape"), "tensor.shape",
                           "tensor \"%s\": element count of shape %s overflows 64 bits",
                           ST_NAME, ST_SHAPE);

    /* data_offsets */
    const json_t *off = json_object_get(v, "data_offsets");
    if (!off)
        return tbx_err(err, TBX_E_FORMAT, eat, "tensor.data_offsets",
                       "tensor \"%s\": missing field \"data_offsets\"", ST_NAME);
    if (!json_is_array(off) || json_array_size(off) != 2) {
        if (json_is_array(off))
            snprintf(b, sizeof b, "an array of %zu elements", json_array_size(off));
        else
            snprintf(b, sizeof b, "%s", js_type_name(off));
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("data_offsets"), "tensor.data_offsets",
                       "tensor \"%s\": data_offsets must be an array [begin, end] of 2 integers, "
                       "got %s", ST_NAME, b);
    }
    for (size_t i = 0; i < 2; i++) {
        const json_t *x = json_array_get(off, i);
        if (!st_uint(x, i ? &e->end : &e->begin)) {
            js_brief(b, sizeof b, x);
            return tbx_err(err, TBX_E_FORMAT, ST_ELEM("data_offsets", i), "tensor.data_offsets",
                           "tensor \"%s\": data_offsets[%zu] must be a non-negative integer, "
                           "got %s", ST_NAME, i, b);
        }
    }
    if (e->end < e->begin)
        return tbx_err(err, TBX_E_RANGE, ST_FIELD("data_offsets"), "tensor.data_offsets",
                       "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] end before begin",
                       ST_NAME, e->begin, e->end);

    /* size = numel x bits / 8, a whole number of bytes */
    uint64_t bits;
    if (!tbx_mul_u64(nelems, d->bits, &bits))
        return tbx_err(err, TBX_E_OVERFLOW, ST_FIELD("shape"), "tensor.shape",
                       "tensor \"%s\": size in bits of dtype %s shape %s overflows 64 bits",
                       ST_NAME, d->name, ST_SHAPE);
    if (bits % 8)
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("shape"), "tensor.shape",
                       "tensor \"%s\": dtype %s shape %s is %" PRIu64 " bits, not a whole number "
                       "of bytes", ST_NAME, d->name, ST_SHAPE, bits);
    uint64_t nbytes = bits / 8;
    if (nbytes > f->limits.max_tensor_bytes)
        return tbx_err(err, TBX_E_LIMIT, ST_FIELD("data_offsets"), "tensor.data_offsets",
                       "tensor \"%s\": %" PRIu64 " bytes exceed max_tensor_bytes = %" PRIu64,
                       ST_NAME, nbytes, f->limits.max_tensor_bytes);
    if (e->end - e->begin != nbytes)
        return tbx_err(err, TBX_E_FORMAT, ST_FIELD("data_offsets"), "tensor.data_offsets",
                       "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] give %" PRIu64
                       " bytes, dtype %s shape %s needs %" PRIu64, ST_NAME, e->begin, e->end,
                       e->end - e->begin, d->name, ST_SHAPE, nbytes);
    return TBX_OK;
#undef ST_NAME
#undef ST_SHAPE
}

/* Sorted by (begin, end, name), the tensors must tile [0, data_size) exactly. */
static tbx_status st_check_tiling(st_ctx *c, st_ent *ents, size_t nt, uint64_t data_start,
                                  uint64_t data_size, tbx_error *err) {
    uint64_t expect = 0;
    char q[96], p[96];
    for (size_t i = 0; i < nt; i++) {
        st_ent *e = &ents[i];
        size_t vpos = e->vpos;
        if (e->begin == expect && e->end <= data_size) { expect = e->end; continue; }
        tbx_quote_bytes(q, sizeof q, e->name, e->name_len, 64);
        if (e->begin > expect) {
            if (i == 0)
                return tbx_err(err, TBX_E_RANGE, ST_FIELD("data_offsets"), "tensor.data_offsets",
                               "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] leave a "
                               "gap: the first tensor must begin at 0", q, e->begin, e->end);
            tbx_quote_bytes(p, sizeof p, ents[i - 1].name, ents[i - 1].name_len, 64);
            return tbx_err(err, TBX_E_RANGE, ST_FIELD("data_offsets"), "tensor.data_offsets",
                           "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap "
                           "of %" PRIu64 " bytes after tensor \"%s\" (ends at %" PRIu64 ")", q,
                           e->begin, e->end, e->begin - expect, p, expect);
        }
        if (e->begin < expect) {
            tbx_quote_bytes(p, sizeof p, ents[i - 1].name, ents[i - 1].name_len, 64);
            return tbx_err(err, TBX_E_RANGE, ST_FIELD("data_offsets"), "tensor.data_offsets",
                           "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] overlap "
                           "tensor \"%s\" (ends at %" PRIu64 ")", q, e->begin, e->end, p, expect);
        }
        uint64_t abs_end;
        if (!tbx_add_u64(data_start, e->end, &abs_end)) abs_end = UINT64_MAX;
        return tbx_err(err, TBX_E_TRUNCATED, ST_FIELD("data_offsets"), "tensor.data_offsets",
                       "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] end at file byte "
                       "%" PRIu64 ", past the end of the file (%" PRIu64 " bytes; data section "
                       "of %" PRIu64 ")", q, e->begin, e->end, abs_end, data_start + data_size,
                       data_size);
    }
    if (expect != data_size)
        return tbx_err(err, TBX_E_RANGE, data_start + expect, "data",
                       "%" PRIu64 " trailing bytes after the last tensor: the tensors cover "
                       "%" PRIu64 " bytes of the %" PRIu64 "-byte data section",
                       data_size - expect, expect, data_size);
    return TBX_OK;
}

#undef ST_FIELD
#undef ST_ELEM

/* A jansson error in the piece of header text starting at text index `base`. */
static tbx_status st_json_error(const st_ctx *c, size_t base, const json_error_t *je,
                                tbx_error *err) {
    uint64_t at = 8 + (uint64_t)base + (uint64_t)(je->position > 0 ? (size_t)je->position : 0);
    if (at > 8 + (uint64_t)c->n) at = 8 + (uint64_t)c->n;
    tbx_status code = TBX_E_FORMAT;
    const char *what = "invalid JSON";
    switch (json_error_code(je)) {
    case json_error_out_of_memory: return tbx_err_nomem(err, "safetensors header JSON");
    case json_error_stack_overflow: code = TBX_E_LIMIT; what = "JSON nested too deeply"; break;
    case json_error_duplicate_key: code = TBX_E_DUPLICATE; what = "duplicate key"; break;
    case json_error_numeric_overflow:
        code = TBX_E_OVERFLOW;
        what = "number out of range (integers must be below 2^63)";
        break;
    case json_error_null_byte_in_key:
        code = TBX_E_UNSUPPORTED;
        what = "a tensor name or metadata key containing NUL (\\u0000) is not supported";
        break;
    case json_error_invalid_utf8: what = "invalid UTF-8"; break;
    default: break;
    }
    char why[256];
    tbx_json_reason(why, sizeof why, je->text, c->hdr, c->n, (size_t)(at - 8));
    return tbx_err(err, code, at, "header.json", "header JSON: %s: %s", what, why);
}

/* An error in the structure of the header object itself (the text between members). */
static tbx_status st_syntax(const st_ctx *c, size_t i, const char *what, tbx_error *err) {
    char near[16] = "end of header";
    if (i < c->n) {
        unsigned char ch = (unsigned char)c->hdr[i];
        if (ch >= 0x20 && ch < 0x7f) snprintf(near, sizeof near, "'%c'", ch);
        else snprintf(near, sizeof near, "byte 0x%02x", ch);
    }
    return tbx_err(err, TBX_E_FORMAT, st_at(c, i), "header.json",
                   "header JSON: invalid JSON: %s, near %s", what, near);
}

static const char *st_name_of(const void *ctx, uint64_t i, size_t *len) {
    const st_ctx *c = ctx;
    *len = c->ents[i].name_len;
    return c->names + c->ents[i].name_off;
}

/* Decodes the member key at text [kat, kend) (quotes included) onto the end of c->names; *klen
 * gets its length. Keys without escapes or control bytes are their own text (the header is
 * valid UTF-8 already); the others go through jansson, which rejects what it rejected in the
 * whole-header parse (bad escapes, lone surrogates, control characters). */
static tbx_status st_key(st_ctx *c, size_t kat, size_t kend, size_t *klen, tbx_error *err) {
    tbx_file *f = c->f;
    const char *raw = c->hdr + kat + 1;
    size_t rlen = kend - kat - 2;
    bool plain = true;
    for (size_t k = 0; k < rlen && plain; k++)
        if (raw[k] == '\\' || (unsigned char)raw[k] < 0x20) plain = false;
    json_t *js = NULL;
    const char *p = raw;
    size_t len = rlen;
    if (!plain) {
        json_error_t je;
        js = json_loadb(c->hdr + kat, kend - kat, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!js) return st_json_error(c, kat, &je, err);
        p = json_string_value(js);
        len = json_string_length(js);
        if (memchr(p, 0, len)) {
            json_decref(js);
            return tbx_err(err, TBX_E_UNSUPPORTED, st_at(c, kat), "header.json",
                           "header JSON: a tensor name or metadata key containing NUL (\\u0000) "
                           "is not supported");
        }
    }
    tbx_status st = TBX_OK;
    if (!tbx_grow(&f->al, (void **)&c->names, &c->names_cap, c->names_len + len + 1, 1)) {
        st = tbx_err_nomem(err, "safetensors names");
    } else {
        memcpy(c->names + c->names_len, p, len);
        c->names[c->names_len + len] = 0;
        c->names_len += len + 1;
        *klen = len;
    }
    if (js) json_decref(js);
    return st;
}

/* The 8-byte header length: read, not empty, within the limits and the file. */
static tbx_status st_header_length(tbx_file *f, const tbx_source *src, uint64_t *n_out,
                                   tbx_error *err) {
    uint64_t size = src->size;
    uint8_t lb[8];
    if (size < 8)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "header.length",
                       "file of %" PRIu64 " bytes is too short for the 8-byte header length",
                       size);
    tbx_status st = tbx_source_read(src, 0, lb, 8, "header.length", err);
    if (st != TBX_OK) return st;
    uint64_t n = tbx_ld64(lb);
    if (n == 0)
        return tbx_err(err, TBX_E_FORMAT, 0, "header.length",
                       "header length 0: the JSON header cannot be empty");
    if (n > ST_MAX_HEADER)
        return tbx_err(err, TBX_E_LIMIT, 0, "header.length",
                       "header length %" PRIu64 " exceeds the safetensors maximum of 100000000 "
                       "bytes", n);
    if (n > f->limits.max_header_bytes)
        return tbx_err(err, TBX_E_LIMIT, 0, "header.length",
                       "header length %" PRIu64 " exceeds max_header_bytes = %" PRIu64, n,
                       f->limits.max_header_bytes);
    if (n > size - 8)
        return tbx_err(err, TBX_E_TRUNCATED, 0, "header.length",
                       "header length %" PRIu64 " runs past the end of the file (%" PRIu64
                       " bytes follow the length field)", n, size - 8);
    *n_out = n;
    return TBX_OK;
}

/* The header text before any JSON parse: starts with '{', valid UTF-8, nesting within
 * max_depth, no more members than max_tensors (+1 for __metadata__). */
static tbx_status st_header_precheck(const st_ctx *c, tbx_error *err) {
    tbx_file *f = c->f;
    const char *hdr = c->hdr;
    size_t n = c->n;
    if (hdr[0] != '{')
        return tbx_err(err, TBX_E_FORMAT, 8, "header",
                       "header must start with '{', got byte 0x%02x", (unsigned)(uint8_t)hdr[0]);
    size_t bad = 0;
    if (!tbx_utf8_valid(hdr, n, &bad))
        return tbx_err(err, TBX_E_FORMAT, 8 + (uint64_t)bad, "header",
                       "header is not valid UTF-8 (byte 0x%02x)", (unsigned)(uint8_t)hdr[bad]);
    size_t deep_at;
    uint64_t members;
    js_prescan(hdr, n, f->limits.max_depth, &deep_at, &members);
    if (deep_at != JS_NONE)
        return tbx_err(err, TBX_E_LIMIT, 8 + (uint64_t)deep_at, "header.json",
                       "header JSON nested deeper than max_depth = %u", f->limits.max_depth);
    if (members > f->limits.max_tensors && members - 1 > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, 8, "header", "header declares %" PRIu64 " members, more "
                       "than max_tensors = %" PRIu64 " (+1 for __metadata__)", members,
                       f->limits.max_tensors);
    return TBX_OK;
}

/* The fast path for a tensor entry. Nearly every header writes its entries in one plain form:
 * {"dtype":"F32","shape":[2,3],"data_offsets":[0,24]} (any JSON whitespace, the keys in any
 * order). Reading that form directly, without a jansson tree (a dozen allocations per entry),
 * makes opening about twice as fast (docs/formats/safetensors.md, "Opening speed").
 * The fast path accepts only a strict subset of JSON that jansson would accept with the same
 * result: the three known keys without escapes, each once and no other key; a dtype of
 * [A-Z0-9_] bytes; arrays of unsigned integers of at most 18 digits without a leading zero
 * (below 2^63, jansson's integer range). It also takes only entries that pass every check of
 * st_parse_entry. Anything else, valid or not, returns false and goes through jansson and
 * st_parse_entry, which report the problem exactly as before; so this path never accepts what
 * the other would refuse, and never decides an error itself. */
#define ST_FAST_NDIM 16

/* An array of unsigned integers at text index i ('['): up to `cap` values into v[], *count
 * gets their number; returns the index after ']' or JS_NONE (not the plain form). */
static size_t st_fast_uints(const char *p, size_t n, size_t i, uint64_t *v, size_t cap,
                            size_t *count) {
    if (i >= n || p[i] != '[') return JS_NONE;
    size_t k = 0;
    i = js_ws(p, n, i + 1);
    if (i < n && p[i] == ']') { *count = 0; return i + 1; }
    for (;;) {
        if (k == cap || i >= n || p[i] < '0' || p[i] > '9') return JS_NONE;
        size_t d0 = i;
        uint64_t x = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') x = x * 10 + (uint64_t)(p[i++] - '0');
        size_t digits = i - d0;
        if (digits > 18 || (digits > 1 && p[d0] == '0')) return JS_NONE;
        v[k++] = x;
        i = js_ws(p, n, i);
        if (i < n && p[i] == ',') { i = js_ws(p, n, i + 1); continue; }
        if (i < n && p[i] == ']') { *count = k; return i + 1; }
        return JS_NONE;
    }
}

static bool st_fast_entry(st_ctx *c, size_t name_len, size_t vpos, size_t vend, st_ent *e) {
    tbx_file *f = c->f;
    const char *p = c->hdr;
    size_t n = vend; /* the value ends here */
    if (name_len > f->limits.max_string_len) return false;
    size_t i = vpos;
    if (i >= n || p[i] != '{') return false;
    int rank = -1;
    uint64_t dims[ST_FAST_NDIM], offs[2];
    size_t ndim = 0, noffs = 0;
    unsigned seen = 0; /* 1 dtype, 2 shape, 4 data_offsets */
    i = js_ws(p, n, i + 1);
    for (;;) {
        if (i >= n || p[i] != '"') return false;
        size_t ks = i + 1, ke = ks;
        while (ke < n && p[ke] >= 'a' && p[ke] <= 'z') ke++;
        if (ke < n && p[ke] == '_') { /* data_offsets */
            ke++;
            while (ke < n && p[ke] >= 'a' && p[ke] <= 'z') ke++;
        }
        if (ke >= n || p[ke] != '"') return false;
        size_t kl = ke - ks;
        i = js_ws(p, n, ke + 1);
        if (i >= n || p[i] != ':') return false;
        i = js_ws(p, n, i + 1);
        if (kl == 5 && memcmp(p + ks, "dtype", 5) == 0 && !(seen & 1)) {
            seen |= 1;
            if (i >= n || p[i] != '"') return false;
            size_t ds = i + 1, de = ds;
            while (de < n && ((p[de] >= 'A' && p[de] <= 'Z') || (p[de] >= '0' && p[de] <= '9') ||
                              p[de] == '_'))
                de++;
            if (de >= n || p[de] != '"') return false;
            rank = st_rank_of_name(p + ds, de - ds);
            if (rank < 0) return false;
            i = de + 1;
        } else if (kl == 5 && memcmp(p + ks, "shape", 5) == 0 && !(seen & 2)) {
            seen |= 2;
            i = st_fast_uints(p, n, i, dims, ST_FAST_NDIM, &ndim);
            if (i == JS_NONE) return false;
        } else if (kl == 12 && memcmp(p + ks, "data_offsets", 12) == 0 && !(seen & 4)) {
            seen |= 4;
            i = st_fast_uints(p, n, i, offs, 2, &noffs);
            if (i == JS_NONE || noffs != 2) return false;
        } else {
            return false; /* another key, or one given twice */
        }
        i = js_ws(p, n, i);
        if (i < n && p[i] == ',') { i = js_ws(p, n, i + 1); continue; }
        if (i < n && p[i] == '}') { i++; break; }
        return false;
    }
    if (i != vend || seen != 7) return false;
    /* the checks of st_parse_entry, in the same order; any failure is reported by it */
    if (ndim > f->limits.max_ndim || ndim > f->limits.max_array_len) return false;
    uint64_t nelems = 1;
    for (size_t k = 0; k < ndim; k++)
        if (!tbx_mul_u64(nelems, dims[k], &nelems)) return false;
    uint64_t bits;
    if (offs[1] < offs[0] || !tbx_mul_u64(nelems, st_dtypes[rank].bits, &bits) || bits % 8 ||
        bits / 8 > f->limits.max_tensor_bytes || offs[1] - offs[0] != bits / 8)
        return false;
    if (!tbx_grow(&f->al, (void **)&c->dims, &c->dims_cap, c->ndims + ndim, sizeof *c->dims))
        return false; /* st_parse_entry reports it */
    e->rank = (uint8_t)rank;
    e->dim_off = (uint32_t)c->ndims;
    e->ndim = (uint32_t)ndim;
    for (size_t k = 0; k < ndim; k++) c->dims[c->ndims++] = dims[k];
    e->begin = offs[0];
    e->end = offs[1];
    return true;
}

/* State of the member-by-member walk of the header object. */
typedef struct st_walk {
    bool have_meta;
    size_t meta_at;      /* text index of the __metadata__ key */
    tbx_error first;     /* the first entry problem, reported once the JSON is known valid */
    tbx_status first_st;
} st_walk;

/* The member whose key starts at text index i: key decoded (a tensor entry, or __metadata__ once),
 * value parsed as one small tree and checked; *vend_out gets the end of its value. */
static tbx_status st_member(st_ctx *c, st_walk *w, size_t i, size_t *vend_out, tbx_error *err) {
    tbx_file *f = c->f;
    const char *hdr = c->hdr;
    size_t n = c->n;
    if (i >= n || hdr[i] != '"') return st_syntax(c, i, "expected '\"' (an object key)", err);
    size_t kat = i, kend = js_skip_string(hdr, n, i);
    if (kend == JS_NONE) return st_syntax(c, i, "unterminated string", err);
    size_t vpos = js_ws(hdr, n, kend);
    if (vpos >= n || hdr[vpos] != ':')
        return st_syntax(c, vpos, "expected ':' after an object key", err);
    vpos = js_ws(hdr, n, vpos + 1);
    size_t vend = js_skip_value(hdr, n, vpos);
    if (vend == JS_NONE) vend = n;                   /* unterminated: jansson says why */
    else if (vend == vpos && vend < n) vend++;       /* no value: show jansson the byte */

    /* the key: decoded into c->names (a tensor) or compared (__metadata__) */
    size_t name_off = c->names_len, klen = 0;
    tbx_status st = st_key(c, kat, kend, &klen, err);
    if (st != TBX_OK) return st;
    bool is_meta = klen == 12 && memcmp(c->names + name_off, "__metadata__", 12) == 0;
    char q[96];
    if (is_meta) {
        c->names_len = name_off; /* not a tensor name */
        if (w->have_meta)
            return tbx_err(err, TBX_E_DUPLICATE, 8 + (uint64_t)kat, "header.json",
                           "header JSON: duplicate key: \"__metadata__\" appears twice "
                           "(first at byte %" PRIu64 ")", 8 + (uint64_t)w->meta_at);
        w->have_meta = true;
        w->meta_at = kat;
    } else {
        st = st_charge(c, ST_ENT_COST + klen + 1, 8 + (uint64_t)kat, "header.json", err);
        if (st != TBX_OK) return st;
        if (!tbx_grow(&f->al, (void **)&c->ents, &c->ents_cap, c->nents + 1, sizeof *c->ents))
            return tbx_err_nomem(err, "safetensors tensor table");
        st_ent *e = &c->ents[c->nents];
        memset(e, 0, sizeof *e);
        e->name_off = (uint32_t)name_off;
        e->name_len = (uint32_t)klen;
        e->vpos = (uint32_t)vpos;
        uint64_t dup;
        tbx_status ist = tbx_names_insert(&c->index, c->nents, &dup);
        if (ist == TBX_E_NOMEM) return tbx_err_nomem(err, "safetensors names");
        if (ist == TBX_E_DUPLICATE) {
            tbx_quote_bytes(q, sizeof q, c->names + name_off, klen, 64);
            return tbx_err(err, TBX_E_DUPLICATE, 8 + (uint64_t)kat, "header.json",
                           "header JSON: duplicate key: tensor \"%s\" appears twice "
                           "(first entry at byte %" PRIu64 ")", q, st_at(c, c->ents[dup].vpos));
        }
        c->nents++;
    }

    /* the value: a tensor entry in the plain form read directly, else one small tree */
    if (!is_meta && w->first_st == TBX_OK &&
        st_fast_entry(c, klen, vpos, vend, &c->ents[c->nents - 1])) {
        *vend_out = vend;
        return st_charge(c, ST_DIM_COST * c->ents[c->nents - 1].ndim, 8 + (uint64_t)vpos,
                         "tensor.shape", err);
    }
    /* __metadata__ is one tree of every key and value (about ST_JS_MEMBER_COST bytes a member
     * besides the text): charged while it lives, next to the values the model copies from it */
    uint64_t tree = 0;
    if (is_meta) {
        tree = (uint64_t)js_members(hdr, n, vpos, NULL, NULL, 0) * ST_JS_MEMBER_COST +
               (vend - vpos);
        st = st_charge(c, tree, 8 + (uint64_t)vpos, "header.__metadata__", err);
        if (st != TBX_OK) return st;
    }
    json_error_t je;
    json_t *val = json_loadb(hdr + vpos, vend - vpos,
                             JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!val) {
        st_uncharge(c, tree);
        return st_json_error(c, vpos, &je, err);
    }
    if (w->first_st == TBX_OK) {
        tbx_error e1;
        tbx_status est;
        if (is_meta)
            est = st_parse_meta(c, val, vpos, &e1);
        else
            est = st_parse_entry(c, c->names + name_off, klen, val, vpos, &c->ents[c->nents - 1],
                                 &e1);
        if (est == TBX_E_NOMEM) {
            if (err) *err = e1;
            json_decref(val);
            st_uncharge(c, tree);
            return est;
        }
        if (est != TBX_OK) { w->first = e1; w->first_st = est; }
        if (!is_meta && est == TBX_OK) {
            st = st_charge(c, ST_DIM_COST * c->ents[c->nents - 1].ndim, 8 + (uint64_t)vpos,
                           "tensor.shape", err);
            if (st != TBX_OK) { json_decref(val); return st; }
        }
    }
    json_decref(val);
    st_uncharge(c, tree);
    *vend_out = vend;
    return TBX_OK;
}

/* The header object, walked member by member: this code finds where each key and value starts
 * and ends, jansson decodes each of them on its own, and each value's tree is freed before the
 * next one is parsed. One tree of the whole header would cost about 19 times the header
 * (1.37 GB for a 71 MB header of 1M tensors; see docs/formats/safetensors.md). Every JSON error
 * (syntax, duplicate keys, number ranges, NUL in keys) is still reported before any problem of
 * an entry, as when jansson read the header in one piece. */
static tbx_status st_walk_header(st_ctx *c, tbx_error *err) {
    tbx_file *f = c->f;
    const char *hdr = c->hdr;
    size_t n = c->n;
    st_walk w = {.first_st = TBX_OK};
    tbx_status st;
    size_t i = js_ws(hdr, n, 1);
    if (i < n && hdr[i] == '}') {
        i++;
    } else {
        for (;;) {
            size_t vend = 0;
            st = st_member(c, &w, i, &vend, err);
            if (st != TBX_OK) return st;
            i = js_ws(hdr, n, vend);
            if (i < n && hdr[i] == ',') { i = js_ws(hdr, n, i + 1); continue; }
            if (i < n && hdr[i] == '}') { i++; break; }
            return st_syntax(c, i, "expected ',' or '}' after an object member", err);
        }
    }
    i = js_ws(hdr, n, i);
    if (i < n)
        return st_syntax(c, i, "end of header expected after the object (only spaces may pad it)",
                         err);

    size_t nt = c->nents;
    if (nt > f->limits.max_tensors)
        return tbx_err(err, TBX_E_LIMIT, 8, "header", "header declares %zu tensors, more than "
                       "max_tensors = %" PRIu64, nt, f->limits.max_tensors);
    if (w.first_st != TBX_OK) {
        if (err) *err = w.first;
        return w.first_st;
    }
    return TBX_OK;
}

/* The model: one dense tensor per entry (entries in offset order), data at data_start. */
static tbx_status st_add_tensors(st_ctx *c, uint64_t data_start, tbx_error *err) {
    tbx_file *f = c->f;
    size_t nt = c->nents;
    tbx_status st = tbx_file_reserve_tensors(f, nt, err);
    if (st != TBX_OK) return st;
    /* the entries are consumed from the end of their array (reversed), which shrinks as the
     * model grows: the two tables never both hold every tensor */
    for (size_t a = 0, b = nt; a + 1 < b; a++, b--) {
        st_ent tmp = c->ents[a];
        c->ents[a] = c->ents[b - 1];
        c->ents[b - 1] = tmp;
    }
    for (size_t left = nt; left > 0; left--) {
        if (left <= c->ents_cap / 2 && c->ents_cap > 4096) {
            st_ent *p = tbx_realloc(&f->al, c->ents, c->ents_cap * sizeof *c->ents,
                                    left * sizeof *c->ents);
            if (p) { c->ents = p; c->ents_cap = left; }
        }
        st_ent *e = &c->ents[left - 1];
        st_uncharge(c, 2 * sizeof(st_ent)); /* its slot (the array shrinks behind) */
        tbx_tensor *t = NULL;
        const st_dtype *d = &st_dtypes[e->rank];
        const uint64_t *shape = e->ndim ? c->dims + e->dim_off : NULL;
        if (c->set) {
            st = c->set->tensor(c->set->set, e->name, e->name_len, c->src_idx, st_at(c, e->vpos),
                                     err);
            if (st != TBX_OK) return st;
        }
        st = tbx_file_add_tensor(f, e->name, e->name_len, d->dtype, shape, e->ndim, 1,
                                 st_at(c, e->vpos), &t, err);
        if (st != TBX_OK) return st;
        t->layout = TBX_LAYOUT_DENSE;
        /* the size is checked: the dtype and shape's */
        tbx_comp_set_raw(t, d->dtype, data_start + e->begin, e->end - e->begin);
        t->comp[0].src = c->src_idx;
    }
    return TBX_OK;
}

tbx_status st_open_source(tbx_file *f, const tbx_source *src, uint32_t src_idx,
                          const st_shard_check *set,
                          tbx_error *err) {
    uint64_t size = src->size;
    uint64_t n = 0;
    tbx_status st = st_header_length(f, src, &n, err);
    if (st != TBX_OK) return st;

    st_ctx c = {.f = f, .src = src, .src_idx = src_idx, .set = set, .n = (size_t)n};
    char *hdr = tbx_malloc(&f->al, (size_t)n);
    if (!hdr) return tbx_err_nomem(err, "safetensors header");
    c.hdr = hdr;
    tbx_names_init(&c.index, &f->al, st_name_of, &c);

    st = tbx_source_read(src, 8, hdr, (size_t)n, "header", err);
    if (st == TBX_OK) st = st_header_precheck(&c, err);
    if (st == TBX_OK) st = st_walk_header(&c, err);
    if (st != TBX_OK) goto done;

    /* names are final: point the entries at them, then the index is no longer needed */
    size_t nt = c.nents;
    tbx_names_free(&c.index);
    st_uncharge(&c, 16 * (uint64_t)nt);
    for (size_t k = 0; k < nt; k++) c.ents[k].name = c.names + c.ents[k].name_off;

    if (nt) qsort(c.ents, nt, sizeof *c.ents, st_ent_cmp);
    uint64_t data_start = 8 + n;
    st = st_check_tiling(&c, c.ents, nt, data_start, size - data_start, err);
    if (st != TBX_OK) goto done;

    /* the text is no longer needed (entries keep their offsets): give it back before the
     * model grows */
    tbx_free(&f->al, hdr, (size_t)n);
    hdr = NULL;
    c.hdr = NULL;
    st = st_add_tensors(&c, data_start, err);
    if (st != TBX_OK) goto done;
    f->version = 0;
    st = TBX_OK;

done:
    st_uncharge(&c, c.charged); /* the tables below are freed */
    tbx_names_free(&c.index);
    tbx_free(&f->al, c.ents, c.ents_cap * sizeof *c.ents);
    tbx_free(&f->al, c.names, c.names_cap);
    tbx_free(&f->al, c.dims, c.dims_cap * sizeof *c.dims);
    if (hdr) tbx_free(&f->al, hdr, (size_t)n);
    return st;
}

tbx_status st_open(tbx_file *f, tbx_error *err) {
    return st_open_source(f, &f->src, 0, NULL, err);
}

void st_close(tbx_file *f) { (void)f; }

/* ------------------------------------------------------------------------------------------ */
/* Writing                                                                                     */
/* ------------------------------------------------------------------------------------------ */
/* The header is written to the output (at byte 8 on) in pieces of about ST_FLUSH bytes as it is
 * encoded: the header of a million tensors is never held whole. */
#define ST_FLUSH ((size_t)1 << 20)

typedef struct st_buf {
    const tbx_alloc *al;
    char *p;
    size_t n, cap;
    bool oom;        /* stop: out of memory, or a write failed (wst) */
    tbx_out *out;    /* NULL: held whole */
    uint64_t base;   /* header bytes flushed so far (p[0] is header byte `base`) */
    tbx_status wst;
    tbx_error *err;
} st_buf;

static void sb_flush(st_buf *b) {
    if (b->oom || b->n == 0 || !b->out) return;
    tbx_status st = tbx_out_pwrite(b->out, 8 + b->base, b->p, b->n, b->err);
    if (st != TBX_OK) { b->oom = true; b->wst = st; return; }
    b->base += b->n;
    b->n = 0;
}

static void sb_put(st_buf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->n >= ST_FLUSH) sb_flush(b);
    if (b->oom) return;
    if (n > SIZE_MAX - b->n) { b->oom = true; return; }
    size_t need = b->n + n;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        char *p = tbx_realloc(b->al, b->p, b->cap, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void sb_str(st_buf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void sb_u64(st_buf *b, uint64_t v) {
    char t[24];
    int w = snprintf(t, sizeof t, "%" PRIu64, v);
    sb_put(b, t, (size_t)w);
}

/* A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other bytes below 0x20 as
 * \u00xx (lower-case hex), everything else (0x7f, UTF-8 sequences) verbatim. */
static void sb_json_str(st_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (ch < 0x20) {
                u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
                u[4] = hex[ch >> 4]; u[5] = hex[ch & 15]; u[6] = 0;
                esc = u;
            }
        }
        if (esc) {
            sb_put(b, s + run, i - run);
            sb_str(b, esc);
            run = i + 1;
        }
    }
    sb_put(b, s + run, n - run);
    sb_put(b, "\"", 1);
}

bool st_w_dtype_ok(tbx_dtype dt) { return st_rank_of_dtype(dt) >= 0; }

tbx_status st_w_check_meta(tbx_writer *w, const char *key, size_t key_len,
                                  const tbx_value *v, tbx_error *err) {
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, key, key_len, 64);
    if (!v || !tbx_driver_meta_ok(w->drv, v->type))
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": safetensors stores only string values, not %s", q,
                       v ? tbx_value_type_name(v->type) : "(null)");
    if (!tbx_utf8_valid(key, key_len, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata.key",
                       "metadata key \"%s\" is not valid UTF-8 (byte %zu)", q, bad);
    if (memchr(key, 0, key_len))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "metadata.key",
                       "metadata key \"%s\" contains NUL, which tensorbox cannot read back", q);
    if (!tbx_utf8_valid(v->v.s.p, v->v.s.n, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "metadata",
                       "metadata \"%s\": value is not valid UTF-8 (byte %zu)", q, bad);
    return TBX_OK;
}

tbx_status st_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err) {
    (void)w;
    char q[96];
    size_t bad = 0;
    tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
    if (!t->has_data)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor",
                       "tensor \"%s\": safetensors cannot store a tensor without data", q);
    int rank = st_rank_of_dtype(t->dtype);
    if (!st_w_dtype_ok(t->dtype)) {
        const tbx_dtype_info *di = tbx_dtype_core_get(t->dtype);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                       "tensor \"%s\": dtype %s has no safetensors equivalent", q,
                       di ? di->name : "of another format");
    }
    if (!tbx_utf8_valid(t->name, t->name_len, &bad))
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" is not valid UTF-8 (byte %zu)", q, bad);
    if (memchr(t->name, 0, t->name_len))
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"%s\" contains NUL, which tensorbox cannot read back", q);
    if (t->name_len == 12 && memcmp(t->name, "__metadata__", 12) == 0)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.name",
                       "tensor name \"__metadata__\" is reserved by safetensors");
    /* Same rules as the reader: every dimension below 2^63, running product checked. */
    uint64_t nelems = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (t->shape[d] > ST_DIM_MAX)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": shape[%u] = %" PRIu64 " is 2^63 or more, which "
                           "tensorbox cannot read back", q, d, t->shape[d]);
        if (!tbx_mul_u64(nelems, t->shape[d], &nelems))
            return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                           "tensor \"%s\": element count overflows 64 bits at shape[%u]", q, d);
    }
    uint64_t bits;
    if (!tbx_mul_u64(nelems, st_dtypes[rank].bits, &bits))
        return tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": byte size overflows 64 bits", q);
    if (bits % 8)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": %" PRIu64 " elements of %s are %" PRIu64 " bits, not a "
                       "whole number of bytes", q, nelems, st_dtypes[rank].name, bits);
    uint64_t nbytes = 0;
    tbx_status st = tbx_dtype_core_nbytes_shape(t->dtype, t->shape, t->ndim, &nbytes);
    if (st != TBX_OK)
        return tbx_err(err, st, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": cannot compute the byte size of dtype %s", q,
                       st_dtypes[rank].name);
    if (nbytes != bits / 8)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "tensor.shape",
                       "tensor \"%s\": dtype table gives %" PRIu64 " bytes, safetensors %" PRIu64,
                       q, nbytes, bits / 8);
    t->nbytes = nbytes;
    return TBX_OK;
}

typedef struct st_wref {
    tbx_wtensor *t;
    int rank;
} st_wref;

static int st_wt_cmp(const void *a, const void *b) {
    const st_wref *ra = a, *rb = b;
    const tbx_wtensor *x = ra->t, *y = rb->t;
    if (ra->rank != rb->rank) return ra->rank > rb->rank ? -1 : 1; /* descending dtype rank */
    size_t m = x->name_len < y->name_len ? x->name_len : y->name_len;
    int r = memcmp(x->name, y->name, m);
    if (r) return r;
    return x->name_len < y->name_len ? -1 : (x->name_len > y->name_len);
}

tbx_status st_w_layout(tbx_writer *w, tbx_error *err) {
    if (w->nsections)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "sections",
                       "safetensors cannot store sections (%zu given)", w->nsections);
    for (size_t i = 0; i < w->nmeta; i++) {
        tbx_status st = st_w_check_meta(w, w->meta[i].key, w->meta[i].key_len, w->meta[i].value,
                                        err);
        if (st != TBX_OK) return st;
    }
    /* The header lists the tensors by descending dtype rank, then by name (as the PyPI
     * writer). A table already in that order (a conversion from safetensors) needs no sort
     * array. */
    size_t nt = w->ntensors;
    bool sorted = true;
    for (size_t i = 0; i < nt; i++) {
        int rank = st_rank_of_dtype(w->tensors[i].dtype);
        if (rank < 0)
            return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor.dtype",
                           "tensor %zu: dtype has no safetensors equivalent", i);
        if (i && sorted) {
            st_wref x = { &w->tensors[i - 1], st_rank_of_dtype(w->tensors[i - 1].dtype) };
            st_wref y = { &w->tensors[i], rank };
            sorted = st_wt_cmp(&x, &y) < 0;
        }
    }
    st_wref *order = NULL;
    if (!sorted) {
        order = tbx_calloc(&w->al, nt, sizeof *order);
        if (!order) return tbx_err_nomem(err, "safetensors tensor order");
        for (size_t i = 0; i < nt; i++) {
            order[i].t = &w->tensors[i];
            order[i].rank = st_rank_of_dtype(w->tensors[i].dtype);
        }
        qsort(order, nt, sizeof *order, st_wt_cmp);
    }

    st_buf b = {.al = &w->al, .out = &w->out, .err = err};
    tbx_status st = TBX_OK;
    uint64_t off = 0;
    bool first = true;
    sb_put(&b, "{", 1);
    if (w->nmeta) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->nmeta; i++) {
            const tbx_meta_entry *m = &w->meta[i];
            if (i) sb_put(&b, ",", 1);
            sb_json_str(&b, m->key, m->key_len);
            sb_put(&b, ":", 1);
            sb_json_str(&b, m->value->v.s.p, m->value->v.s.n);
        }
        sb_put(&b, "}", 1);
        first = false;
    }
    for (size_t i = 0; i < nt && !b.oom; i++) {
        tbx_wtensor *t = order ? order[i].t : &w->tensors[i];
        int rank = order ? order[i].rank : st_rank_of_dtype(t->dtype);
        uint64_t end;
        if (!tbx_add_u64(off, t->nbytes, &end)) {
            st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "tensor.data_offsets",
                         "data section size overflows 64 bits");
            goto done;
        }
        if (!first) sb_put(&b, ",", 1);
        first = false;
        sb_json_str(&b, t->name, t->name_len);
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, st_dtypes[rank].name);
        sb_str(&b, "\",\"shape\":[");
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (d) sb_put(&b, ",", 1);
            sb_u64(&b, t->shape[d]);
        }
        sb_str(&b, "],\"data_offsets\":[");
        sb_u64(&b, off);
        sb_put(&b, ",", 1);
        sb_u64(&b, end);
        sb_str(&b, "]}");
        t->offset = off; /* relative for now */
        off = end;
        if (!b.oom && b.base + b.n > ST_MAX_HEADER) break;
    }
    sb_put(&b, "}", 1);
    while (!b.oom && (b.base + b.n) % 8) sb_put(&b, " ", 1);
    if (b.oom) {
        st = b.wst != TBX_OK ? b.wst : tbx_err_nomem(err, "safetensors header");
        goto done;
    }
    uint64_t hlen = b.base + b.n;
    if (hlen > ST_MAX_HEADER) {
        st = tbx_err(err, TBX_E_LIMIT, 8, "header",
                     "header of %" PRIu64 " bytes or more exceeds the safetensors maximum of "
                     "100000000", hlen);
        goto done;
    }
    uint64_t data_start = 8 + hlen, total;
    if (!tbx_add_u64(data_start, off, &total)) {
        st = tbx_err(err, TBX_E_OVERFLOW, TBX_NO_OFFSET, "data", "file size overflows 64 bits");
        goto done;
    }
    for (size_t i = 0; i < nt; i++) w->tensors[i].offset += data_start;
    sb_flush(&b);
    if (b.oom) { st = b.wst; goto done; }
    uint8_t lb[8];
    tbx_st64(lb, hlen);
    st = tbx_out_pwrite(&w->out, 0, lb, 8, err);
    if (st == TBX_OK) w->end = total;

done:
    tbx_free(&w->al, b.p, b.cap);
    tbx_free(&w->al, order, order ? nt * sizeof *order : 0);
    return st;
}
