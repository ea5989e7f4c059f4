/*
 * safetensors_set.c - a Hugging Face model directory, or a sharded safetensors set, opened as one
 * file (the safetensors driver's claims_path / open_path hooks; core only routes the path here).
 *
 * What a path names:
 *   - a directory DIR: its model is DIR/model.safetensors.index.json (shards), else
 *     DIR/model.safetensors, else the only *.safetensors.index.json, else the only *.safetensors
 *     (several candidates and no such name: an error asking for one of them by path);
 *   - a file named *.safetensors.index.json: that index, its shards beside it;
 *   - any other file, a single shard included, is opened as itself by the ordinary reader.
 *
 * The index (what transformers writes for a sharded checkpoint):
 *
 *   {"metadata": {"total_size": 90866944},
 *    "weight_map": {"embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors",
 *                   "pooler.dense.weight": "model-00002-of-00002.safetensors", ...}}
 *
 * is hostile input like any header: read whole only within the header limits, valid UTF-8, walked
 * member by member (this file finds where each key and value starts and ends, jansson decodes each
 * one on its own, so no tree of a million-entry map is ever built), duplicate keys rejected at
 * every level, other top-level members at most HF_INDEX_MEMBER_MAX bytes of JSON. Every shard
 * name is a plain file name in the index's directory (no '/', '\', "..", absolute paths). The
 * index and the shards must agree exactly: every shard named exists and is a valid safetensors
 * file, each tensor of a shard is mapped to that shard (so no tensor is in two shards), each
 * mapped tensor is in its shard, and no further shard of the same "P-0000K-of-0000N" series lies
 * in the directory unmapped. Index errors name the index file, the field and the byte offset in
 * it; a shard's errors name the shard and the offset in the shard.
 *
 * The handle: f->src is the index (or model.safetensors); f->extra_src holds the shards (sorted by
 * name; each tensor reads from its own shard, component src = 1 + rank) and then the side files;
 * f->part_names names them all relative to the directory. Tensors come shard after shard, each
 * shard's in file order; metadata is the shards' __metadata__ merged (a key two shards give with
 * different values is an error). The side files of the directory are sections named by their
 * path relative to it (see hf_side_name for the rule), every one whatever its size: each is an
 * open source, read when asked for, never loaded at open (what reads one whole checks
 * tbx_limits.max_side_file_bytes and names the file when it is over). Shard headers are parsed one at a time, so opening a set costs
 * what opening its shards one after the other costs, plus the map (about 40 bytes a tensor).
 *
 * Every name is listed, examined and opened through the handle's provider (f->prov,
 * src/io/provider.h: the local directory, or any other store of files): this file never looks
 * at the file system itself, and "DIR" in the messages is the provider's name for the set's
 * directory.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "io.h"
#include "safetensors_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define HF_INDEX_SUFFIX ".safetensors.index.json"
#define HF_ST_SUFFIX ".safetensors"
#define HF_INDEX_MAX 100000000ull          /* as a safetensors header */
#define HF_INDEX_MEMBER_MAX ((size_t)1 << 20) /* top-level members other than weight_map */
#define HF_SIDE_MAX_FILES 256
#define HF_MAX_SHARDS 65535
#define HF_DIR_MAX_ENTRIES 100000 /* names listed in one directory */

static bool ends_with(const char *s, size_t n, const char *sfx) {
    size_t k = strlen(sfx);
    return n >= k && memcmp(s + n - k, sfx, k) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A growing set of decoded strings with a hash index (tensor names, shard names, keys)        */
/* ------------------------------------------------------------------------------------------ */
typedef struct hf_kent {
    size_t off;     /* in blob */
    size_t len;
} hf_kent;

typedef struct hf_keys {
    const tbx_alloc *al;
    char *blob;
    size_t blob_len, blob_cap;
    hf_kent *e;
    size_t n, cap;
    tbx_names index;
} hf_keys;

static const char *hf_key_of(const void *ctx, uint64_t i, size_t *len) {
    const hf_keys *k = ctx;
    *len = k->e[i].len;
    return k->blob + k->e[i].off;
}

static void hf_keys_init(hf_keys *k, const tbx_alloc *al) {
    memset(k, 0, sizeof *k);
    k->al = al;
    tbx_names_init(&k->index, al, hf_key_of, k);
}

static void hf_keys_free(hf_keys *k) {
    tbx_names_free(&k->index);
    tbx_free(k->al, k->blob, k->blob_cap);
    tbx_free(k->al, k->e, k->cap * sizeof *k->e);
}

static const char *hf_key(const hf_keys *k, size_t i) { return k->blob + k->e[i].off; }
static size_t hf_klen(const hf_keys *k, size_t i) { return k->e[i].len; }

/* Adds a string (a NUL is kept after it): *idx gets its index, or with TBX_E_DUPLICATE the index
 * of the equal string already there (nothing added). TBX_E_NOMEM on OOM. */
static tbx_status hf_keys_add(hf_keys *k, const char *p, size_t len, size_t *idx) {
    if (len > SIZE_MAX / 2 || k->blob_len > SIZE_MAX / 2) return TBX_E_NOMEM;
    if (!tbx_grow(k->al, (void **)&k->e, &k->cap, k->n + 1, sizeof *k->e) ||
        !tbx_grow(k->al, (void **)&k->blob, &k->blob_cap, k->blob_len + len + 1, 1))
        return TBX_E_NOMEM;
    memcpy(k->blob + k->blob_len, p, len);
    k->blob[k->blob_len + len] = 0;
    k->e[k->n].off = k->blob_len;
    k->e[k->n].len = len;
    uint64_t dup = 0;
    tbx_status st = tbx_names_insert(&k->index, k->n, &dup);
    if (st == TBX_E_DUPLICATE) { *idx = (size_t)dup; return st; }
    if (st != TBX_OK) return TBX_E_NOMEM;
    k->blob_len += len + 1;
    *idx = k->n++;
    return TBX_OK;
}

static bool hf_keys_find(const hf_keys *k, const char *p, size_t len, size_t *idx) {
    uint64_t i;
    if (!tbx_names_find(&k->index, p, len, &i)) return false;
    *idx = (size_t)i;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The set being opened                                                                         */
/* ------------------------------------------------------------------------------------------ */
typedef struct hf_ent {
    uint32_t shard;   /* index into st_set.shards */
    uint32_t key_at;  /* byte offset of the tensor's key in the index */
    uint32_t val_at;  /* byte offset of its shard name */
    bool found;
} hf_ent;

typedef struct st_set st_set;
struct st_set {
    tbx_file *f;
    const char *index_name; /* for messages: the index's name relative to the directory */
    hf_keys names;          /* weight_map keys: tensor names */
    hf_ent *ents;
    size_t ents_cap;
    hf_keys shards;         /* distinct shard file names, in order of first mention */
    uint32_t *shard_at;     /* byte offset of the first mention of each */
    size_t shard_at_cap;
    uint32_t *shard_src;    /* shard -> source index (1 + rank by name) */
    uint64_t map_at;        /* byte offset of the weight_map object */
    bool index_error;       /* the last error names the index itself (no shard prefix) */
    uint64_t charged;       /* bytes of these tables charged to the handle's budget */
};

/* Charges `bytes` of the tables above (or of what the open keeps per shard) to the handle's
 * amplification budget; past it an error of the index at byte `at`. */
static tbx_status hf_charge(st_set *s, uint64_t bytes, uint64_t at, tbx_error *err) {
    tbx_error e;
    tbx_status st = tbx_file_charge(s->f, bytes, TBX_NO_OFFSET, "weight_map", &e);
    if (st != TBX_OK) {
        s->index_error = true;
        return tbx_err(err, st, at, "weight_map", "%s: %s", s->index_name, e.message);
    }
    s->charged += bytes;
    return TBX_OK;
}

/* An error in the index file: "INDEX: message at byte N". */
static tbx_status __attribute__((format(printf, 6, 7)))
hf_ierr(st_set *s, tbx_error *err, tbx_status code, uint64_t at, const char *field,
        const char *fmt, ...) {
    char msg[sizeof ((tbx_error *)0)->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->index_error = true;
    return tbx_err(err, code, at, field, "%s: %s", s->index_name, msg);
}

static tbx_status hf_nomem(st_set *s, tbx_error *err, const char *what) {
    s->index_error = true;
    return tbx_err_nomem(err, what);
}

/* st_shard_check.tensor: does the index map this tensor to the shard of source src_idx? */
static tbx_status hf_check_tensor(void *set, const char *name, size_t len, uint32_t src_idx,
                                  uint64_t at, tbx_error *err) {
    st_set *s = set;
    char q[96];
    size_t i;
    if (!hf_keys_find(&s->names, name, len, &i)) {
        tbx_quote_bytes(q, sizeof q, name, len, 64);
        return tbx_err(err, TBX_E_FORMAT, at, "tensor",
                       "tensor \"%s\" is not in the weight_map of %s", q, s->index_name);
    }
    hf_ent *e = &s->ents[i];
    if (s->shard_src[e->shard] != src_idx) {
        tbx_quote_bytes(q, sizeof q, name, len, 64);
        const char *holder = s->f->part_names ? s->f->part_names[src_idx] : "?";
        return hf_ierr(s, err, TBX_E_FORMAT, e->val_at, "weight_map",
                       "weight_map maps tensor \"%s\" to \"%s\", but shard \"%s\" holds it", q,
                       hf_key(&s->shards, e->shard), holder ? holder : "?");
    }
    e->found = true;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The index file                                                                               */
/* ------------------------------------------------------------------------------------------ */
typedef struct hf_text {
    const char *p;
    size_t n;
} hf_text;

static tbx_status hf_syntax(st_set *s, const hf_text *t, size_t i, const char *what,
                            tbx_error *err) {
    char near[24] = "end of file";
    if (i < t->n) {
        unsigned char ch = (unsigned char)t->p[i];
        if (ch >= 0x20 && ch < 0x7f) snprintf(near, sizeof near, "'%c'", ch);
        else snprintf(near, sizeof near, "byte 0x%02x", ch);
    }
    return hf_ierr(s, err, TBX_E_FORMAT, i < t->n ? i : t->n, "index.json",
                   "invalid JSON: %s, near %s", what, near);
}

static tbx_status hf_json_error(st_set *s, const hf_text *t, size_t base, const json_error_t *je,
                                tbx_error *err) {
    uint64_t at = (uint64_t)base + (uint64_t)(je->position > 0 ? (size_t)je->position : 0);
    if (at > t->n) at = t->n;
    tbx_status code = TBX_E_FORMAT;
    const char *what = "invalid JSON";
    switch (json_error_code(je)) {
    case json_error_out_of_memory: return hf_nomem(s, err, "index JSON");
    case json_error_stack_overflow: code = TBX_E_LIMIT; what = "JSON nested too deeply"; break;
    case json_error_duplicate_key: code = TBX_E_DUPLICATE; what = "duplicate key"; break;
    case json_error_numeric_overflow: code = TBX_E_OVERFLOW; what = "number out of range"; break;
    default: break;
    }
    char why[256];
    tbx_json_reason(why, sizeof why, je->text, t->p, t->n, (size_t)at);
    return hf_ierr(s, err, code, at, "index.json", "%s: %s", what, why);
}

/* The string token at [at, end) (quotes included) decoded: plain text points into the index,
 * escaped text goes through jansson (*hold: decref it after use). NUL is refused. */
static tbx_status hf_string(st_set *s, const hf_text *t, size_t at, size_t end, json_t **hold,
                            const char **p, size_t *len, tbx_error *err) {
    *hold = NULL;
    const char *raw = t->p + at + 1;
    size_t rlen = end - at - 2;
    for (size_t k = 0; k < rlen; k++) {
        if (raw[k] != '\\' && (unsigned char)raw[k] >= 0x20) continue;
        json_error_t je;
        json_t *js = json_loadb(t->p + at, end - at, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!js) return hf_json_error(s, t, at, &je, err);
        if (memchr(json_string_value(js), 0, json_string_length(js))) {
            json_decref(js);
            return hf_ierr(s, err, TBX_E_UNSUPPORTED, at, "index.json",
                           "a string containing NUL (\\u0000) is not supported");
        }
        *hold = js;
        *p = json_string_value(js);
        *len = json_string_length(js);
        return TBX_OK;
    }
    *p = raw;
    *len = rlen;
    return TBX_OK;
}

/* Why `p` is not a plain file name in the index's directory, or NULL when it is one. */
static const char *hf_bad_shard_name(const char *p, size_t n) {
    if (n == 0) return "is empty";
    if (p[0] == '/') return "is an absolute path";
    if ((n == 2 && memcmp(p, "..", 2) == 0) || (n >= 3 && memcmp(p, "../", 3) == 0) ||
        memmem(p, n, "/../", 4) || (n >= 3 && memcmp(p + n - 3, "/..", 3) == 0))
        return "leads out of the index's directory (\"..\")";
    if (memchr(p, '/', n) || memchr(p, '\\', n))
        return "is a path: a shard must be a file name in the index's directory (no '/' or '\\')";
    if (n == 1 && p[0] == '.') return "is not a file name";
    if (n > 255) return "is longer than a file name can be (255 bytes)";
    return NULL;
}

/* One weight_map member: key (a tensor name) at [kat, kend), value at [vat, vend). */
static tbx_status hf_map_member(st_set *s, const hf_text *t, size_t kat, size_t kend, size_t vat,
                                size_t vend, tbx_error *err) {
    tbx_file *f = s->f;
    json_t *hold = NULL;
    const char *name;
    size_t nlen;
    char q[96], b[300];
    tbx_status st = hf_string(s, t, kat, kend, &hold, &name, &nlen, err);
    if (st != TBX_OK) return st;
    tbx_quote_bytes(q, sizeof q, name, nlen, 64);
    size_t idx = 0;
    /* the map keeps per tensor: its name (the blob may be twice the names while it grows),
     * the name's entry, its index slot and its hf_ent (each array as well) */
    st = hf_charge(s, 2 * (nlen + 1 + sizeof(hf_kent) + sizeof(hf_ent)) + 16, kat, err);
    if (st != TBX_OK) { json_decref(hold); return st; }
    if (nlen > f->limits.max_string_len)
        st = hf_ierr(s, err, TBX_E_LIMIT, kat, "weight_map",
                     "weight_map key \"%s\" of %zu bytes exceeds max_string_len = %" PRIu64, q,
                     nlen, f->limits.max_string_len);
    else if (s->names.n >= f->limits.max_tensors)
        st = hf_ierr(s, err, TBX_E_LIMIT, kat, "weight_map",
                     "weight_map names more than max_tensors = %" PRIu64 " tensors",
                     f->limits.max_tensors);
    else if ((st = hf_keys_add(&s->names, name, nlen, &idx)) == TBX_E_DUPLICATE)
        st = hf_ierr(s, err, TBX_E_DUPLICATE, kat, "weight_map",
                     "duplicate key: tensor \"%s\" appears twice in weight_map (first at byte %"
                     PRIu32 ")", q, s->ents[idx].key_at);
    else if (st != TBX_OK)
        st = hf_nomem(s, err, "index tensor names");
    json_decref(hold);
    if (st != TBX_OK) return st;
    if (!tbx_grow(&f->al, (void **)&s->ents, &s->ents_cap, s->names.n, sizeof *s->ents))
        return hf_nomem(s, err, "index tensor table");
    hf_ent *e = &s->ents[idx];
    memset(e, 0, sizeof *e);
    e->key_at = (uint32_t)kat;
    e->val_at = (uint32_t)vat;

    /* the value: a string naming the shard */
    json_error_t je;
    json_t *v = json_loadb(t->p + vat, vend - vat,
                           JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!v) return hf_json_error(s, t, vat, &je, err);
    if (!json_is_string(v)) {
        json_decref(v);
        return hf_ierr(s, err, TBX_E_FORMAT, vat, "weight_map",
                       "weight_map[\"%s\"] must be a string (a shard file name)", q);
    }
    const char *sp = json_string_value(v);
    size_t sn = json_string_length(v);
    const char *why = memchr(sp, 0, sn) ? "contains NUL" : hf_bad_shard_name(sp, sn);
    if (why) {
        tbx_quote_bytes(b, sizeof b, sp, sn, 200);
        json_decref(v);
        return hf_ierr(s, err, TBX_E_FORMAT, vat, "weight_map",
                       "weight_map[\"%s\"] = \"%s\" %s", q, b, why);
    }
    size_t sh = 0;
    st = hf_keys_add(&s->shards, sp, sn, &sh);
    json_decref(v);
    if (st == TBX_OK) {
        /* a new shard: its name here and in the part names, its entries in the shard tables
         * and its source (a descriptor and a record) */
        st = hf_charge(s, 3 * (sn + 1 + TBX_HEAP_OVERHEAD) + 2 * sizeof(hf_kent) + 16 +
                              4 * sizeof(uint32_t) + 2 * sizeof(size_t) + sizeof(char *) +
                              sizeof(tbx_source), vat, err);
        if (st != TBX_OK) return st;
        if (s->shards.n > HF_MAX_SHARDS)
            return hf_ierr(s, err, TBX_E_LIMIT, vat, "weight_map",
                           "weight_map names more than %d shard files", HF_MAX_SHARDS);
        if (!tbx_grow(&f->al, (void **)&s->shard_at, &s->shard_at_cap, s->shards.n,
                      sizeof *s->shard_at))
            return hf_nomem(s, err, "index shard table");
        s->shard_at[sh] = (uint32_t)vat;
    } else if (st != TBX_E_DUPLICATE) {
        return hf_nomem(s, err, "index shard names");
    }
    e->shard = (uint32_t)sh;
    return TBX_OK;
}

/* Walks the members of the object whose '{' is at `obj` and whose end is `end` (after its '}'),
 * calling `member` (NULL: top level handled by the caller through the same walk). */
typedef tbx_status (*hf_member_fn)(st_set *s, const hf_text *t, size_t kat, size_t kend,
                                   size_t vat, size_t vend, void *ud, tbx_error *err);

static tbx_status hf_walk_object(st_set *s, const hf_text *t, size_t obj, size_t end,
                                 hf_member_fn member, void *ud, tbx_error *err) {
    size_t i = st_js_ws(t->p, end, obj + 1);
    if (i < end && t->p[i] == '}') return i + 1 == end ? TBX_OK
                                                       : hf_syntax(s, t, i + 1, "unexpected data", err);
    for (;;) {
        if (i >= end || t->p[i] != '"') return hf_syntax(s, t, i, "expected '\"' (an object key)", err);
        size_t kat = i, kend = st_js_skip_string(t->p, end, i);
        if (kend == ST_JS_NONE) return hf_syntax(s, t, i, "unterminated string", err);
        size_t c = st_js_ws(t->p, end, kend);
        if (c >= end || t->p[c] != ':') return hf_syntax(s, t, c, "expected ':' after an object key", err);
        size_t vat = st_js_ws(t->p, end, c + 1);
        size_t vend = st_js_skip_value(t->p, end, vat);
        if (vend == ST_JS_NONE) return hf_syntax(s, t, vat, "unterminated value", err);
        if (vend == vat) return hf_syntax(s, t, vat, "expected a value", err);
        tbx_status st = member(s, t, kat, kend, vat, vend, ud, err);
        if (st != TBX_OK) return st;
        i = st_js_ws(t->p, end, vend);
        if (i < end && t->p[i] == ',') { i = st_js_ws(t->p, end, i + 1); continue; }
        if (i < end && t->p[i] == '}' && i + 1 == end) return TBX_OK;
        return hf_syntax(s, t, i, "expected ',' or '}' after an object member", err);
    }
}

static tbx_status hf_map_cb(st_set *s, const hf_text *t, size_t kat, size_t kend, size_t vat,
                            size_t vend, void *ud, tbx_error *err) {
    (void)ud;
    return hf_map_member(s, t, kat, kend, vat, vend, err);
}

typedef struct hf_top {
    hf_keys keys;
    uint32_t *at;
    size_t at_cap;
    bool have_map;
} hf_top;

static tbx_status hf_top_cb(st_set *s, const hf_text *t, size_t kat, size_t kend, size_t vat,
                            size_t vend, void *ud, tbx_error *err) {
    hf_top *top = ud;
    json_t *hold = NULL;
    const char *key;
    size_t klen, idx = 0;
    char q[96];
    tbx_status st = hf_string(s, t, kat, kend, &hold, &key, &klen, err);
    if (st != TBX_OK) return st;
    tbx_quote_bytes(q, sizeof q, key, klen, 64);
    bool is_map = klen == 10 && memcmp(key, "weight_map", 10) == 0;
    st = hf_keys_add(&top->keys, key, klen, &idx);
    json_decref(hold);
    if (st == TBX_E_DUPLICATE)
        return hf_ierr(s, err, TBX_E_DUPLICATE, kat, "index.json",
                       "duplicate key: \"%s\" appears twice (first at byte %" PRIu32 ")", q,
                       top->at[idx]);
    if (st != TBX_OK) return hf_nomem(s, err, "index keys");
    if (!tbx_grow(&s->f->al, (void **)&top->at, &top->at_cap,
                  top->keys.n, sizeof *top->at))
        return hf_nomem(s, err, "index keys");
    top->at[idx] = (uint32_t)kat;
    if (is_map) {
        top->have_map = true;
        s->map_at = vat;
        if (t->p[vat] != '{')
            return hf_ierr(s, err, TBX_E_FORMAT, vat, "weight_map",
                           "weight_map must be an object of tensor name -> shard file name");
        return hf_walk_object(s, t, vat, vend, hf_map_cb, NULL, err);
    }
    /* any other member (transformers writes "metadata": {"total_size": N}): checked to be
     * valid JSON without duplicate keys, not used */
    if (vend - vat > HF_INDEX_MEMBER_MAX)
        return hf_ierr(s, err, TBX_E_LIMIT, vat, "index.json",
                       "member \"%s\" of %zu bytes: members other than weight_map are limited "
                       "to %zu bytes", q, vend - vat, HF_INDEX_MEMBER_MAX);
    json_error_t je;
    json_t *v = json_loadb(t->p + vat, vend - vat, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v) return hf_json_error(s, t, vat, &je, err);
    json_decref(v);
    return TBX_OK;
}

/* Reads and checks the index in f->src into s (weight_map, shard names). */
static tbx_status hf_parse_index(st_set *s, tbx_error *err) {
    tbx_file *f = s->f;
    uint64_t size = f->src.size;
    uint64_t max = HF_INDEX_MAX < f->limits.max_header_bytes ? HF_INDEX_MAX
                                                              : f->limits.max_header_bytes;
    if (size > max)
        return hf_ierr(s, err, TBX_E_LIMIT, 0, "index",
                       "index of %" PRIu64 " bytes exceeds the limit of %" PRIu64
                       " bytes (max_header_bytes, at most 100000000)", size, max);
    char *buf = tbx_malloc(&f->al, (size_t)size + 1);
    if (!buf) return hf_nomem(s, err, "index text");
    hf_text t = {buf, (size_t)size};
    hf_top top;
    hf_keys_init(&top.keys, &f->al);
    top.at = NULL;
    top.at_cap = 0;
    top.have_map = false;
    tbx_status st = tbx_source_read(&f->src, 0, buf, (size_t)size, "index", err);
    if (st != TBX_OK) { s->index_error = true; goto done; }
    size_t bad = 0;
    if (!tbx_utf8_valid(buf, t.n, &bad)) {
        st = hf_ierr(s, err, TBX_E_FORMAT, bad, "index.json", "not valid UTF-8 (byte 0x%02x)",
                     (unsigned)(uint8_t)buf[bad]);
        goto done;
    }
    size_t i = st_js_ws(buf, t.n, 0);
    if (i >= t.n || buf[i] != '{') {
        st = hf_ierr(s, err, TBX_E_FORMAT, i, "index.json",
                     "the index must be a JSON object with a \"weight_map\" member");
        goto done;
    }
    size_t end = st_js_skip_value(buf, t.n, i);
    if (end == ST_JS_NONE) { st = hf_syntax(s, &t, t.n, "unterminated object", err); goto done; }
    st = hf_walk_object(s, &t, i, end, hf_top_cb, &top, err);
    if (st != TBX_OK) goto done;
    size_t rest = st_js_ws(buf, t.n, end);
    if (rest < t.n) {
        st = hf_syntax(s, &t, rest, "end of file expected after the object", err);
        goto done;
    }
    if (!top.have_map)
        st = hf_ierr(s, err, TBX_E_FORMAT, i, "weight_map",
                     "no \"weight_map\" member: not a sharded safetensors index");
done:
    hf_keys_free(&top.keys);
    tbx_free(&f->al, top.at, top.at_cap * sizeof *top.at);
    tbx_free(&f->al, buf, (size_t)size + 1);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The directory (every name found and opened through the handle's provider, f->prov)           */
/* ------------------------------------------------------------------------------------------ */
/* "DIR/NAME" (a relative name one level down), made with f->al; NULL on OOM. */
static char *hf_join(tbx_file *f, const char *dir, const char *name) {
    size_t dl = strlen(dir), nl = strlen(name);
    bool slash = dl && dir[dl - 1] != '/';
    /* exactly strlen + 1 bytes: hf_strfree gives that size back (DIR may end in '/') */
    char *p = tbx_malloc(&f->al, dl + slash + nl + 1);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    if (slash) p[dl++] = '/';
    memcpy(p + dl, name, nl + 1);
    return p;
}

static void hf_strfree(tbx_file *f, char *p) {
    if (p) tbx_free(&f->al, p, strlen(p) + 1);
}

/* Is `name` (an entry at depth 0 or 1) a side file kind: not hidden, and a JSON, text,
 * SentencePiece/tiktoken model or chat template file? */
static bool hf_side_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || name[0] == '.') return false;
    return ends_with(name, n, ".json") || ends_with(name, n, ".txt") ||
           ends_with(name, n, ".model") || ends_with(name, n, ".jinja") ||
           ends_with(name, n, ".tiktoken");
}

static bool hf_list_push(tbx_file *f, tbx_namelist *l, const char *name) {
    if (!tbx_grow(&f->al, (void **)&l->names, &l->cap, l->n + 1, sizeof *l->names)) return false;
    char *p = tbx_memdup0(&f->al, name, strlen(name));
    if (!p) return false;
    l->names[l->n++] = p;
    return true;
}

static int hf_strcmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of directory `sub` of the set (NULL: the set's directory), sorted; at most
 * HF_DIR_MAX_ENTRIES (TBX_E_LIMIT naming the directory). */
static tbx_status hf_readdir(tbx_file *f, const char *sub, tbx_namelist *out, tbx_error *err) {
    return tbx_provider_list(f->prov, sub, HF_DIR_MAX_ENTRIES, &f->al, out, err);
}

/* What NAME of the set is (links followed): *kind 0 regular, 1 directory, -1 neither or
 * missing. TBX_E_NOMEM (named `what`) when the provider could not allocate: every caller fails
 * then, since an entry skipped for want of memory would drop a side file or the model from
 * the open; any other error of the provider is passed on. */
static tbx_status hf_kind(tbx_file *f, const char *name, const char *what, int *kind,
                          tbx_error *err) {
    tbx_entry_kind k;
    tbx_status st = tbx_provider_kind(f->prov, name, &k, NULL, err);
    if (st == TBX_E_NOMEM) return tbx_err_nomem(err, what);
    if (st != TBX_OK) return st;
    *kind = k == TBX_ENTRY_FILE ? 0 : k == TBX_ENTRY_DIR ? 1 : -1;
    return TBX_OK;
}

/* The side files of the set's directory: regular files (links followed) of a side kind
 * (hf_side_name), at depth 0 or 1 (in a subdirectory that is not hidden), other than `skip`
 * (the index read); relative paths, sorted. Every one is listed whatever its size (nothing is
 * read here; a reader of a whole side file checks tbx_limits.max_side_file_bytes,
 * tbx_section_load_). More than HF_SIDE_MAX_FILES: TBX_E_LIMIT. */
static tbx_status hf_side_files(tbx_file *f, const tbx_namelist *top, const char *skip,
                                tbx_namelist *out, tbx_error *err) {
    memset(out, 0, sizeof *out);
    tbx_status st = TBX_OK;
    for (size_t i = 0; i < top->n && st == TBX_OK; i++) {
        const char *name = top->names[i];
        int kind = -1;
        st = hf_kind(f, name, "side files", &kind, err);
        if (st != TBX_OK) break;
        if (kind == 0) {
            if (!hf_side_name(name) || (skip && !strcmp(name, skip))) continue;
            if (!hf_list_push(f, out, name)) st = tbx_err_nomem(err, "side files");
        } else if (kind == 1 && name[0] != '.') {
            tbx_namelist sl;
            st = hf_readdir(f, name, &sl, err);
            for (size_t k = 0; k < sl.n && st == TBX_OK; k++) {
                if (!hf_side_name(sl.names[k])) continue;
                char *rel = hf_join(f, name, sl.names[k]);
                if (!rel) { st = tbx_err_nomem(err, "side files"); break; }
                int sk = -1;
                st = hf_kind(f, rel, "side files", &sk, err);
                if (st == TBX_OK && sk == 0 && !hf_list_push(f, out, rel))
                    st = tbx_err_nomem(err, "side files");
                hf_strfree(f, rel);
            }
            tbx_namelist_free(&f->al, &sl);
        }
        if (st == TBX_OK && out->n > HF_SIDE_MAX_FILES)
            st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                         "directory %s has more than %d side files (*.json, *.txt, *.model, "
                         "*.jinja, *.tiktoken at depth <= 1)", f->prov->dir, HF_SIDE_MAX_FILES);
    }
    if (st != TBX_OK) { tbx_namelist_free(&f->al, out); return st; }
    if (out->n) qsort(out->names, out->n, sizeof *out->names, hf_strcmp);
    return TBX_OK;
}

bool st_claims_path(const tbx_provider *p) {
    if (p->is_dir) return true; /* a directory is a Hugging Face model directory or nothing */
    return p->entry && ends_with(p->entry, strlen(p->entry), HF_INDEX_SUFFIX);
}

/* The model file of the set's directory (see the rules at the top); *is_index says which kind. */
static tbx_status hf_choose(tbx_file *f, const tbx_namelist *top, const char **main,
                            bool *is_index, tbx_error *err) {
    const char *dir = f->prov->dir;
    const char *idx1 = NULL, *st1 = NULL;
    size_t nidx = 0, nst = 0;
    bool have_mi = false, have_ms = false;
    for (size_t i = 0; i < top->n; i++) {
        const char *name = top->names[i];
        size_t n = strlen(name);
        bool isidx = ends_with(name, n, HF_INDEX_SUFFIX), isst = ends_with(name, n, HF_ST_SUFFIX);
        if ((!isidx && !isst) || name[0] == '.') continue;
        int kind = -1;
        tbx_status st = hf_kind(f, name, "directory entry", &kind, err);
        if (st != TBX_OK) return st;
        if (kind != 0) continue;
        if (isidx) { nidx++; if (!idx1) idx1 = name; if (!strcmp(name, "model" HF_INDEX_SUFFIX)) have_mi = true; }
        if (isst) { nst++; if (!st1) st1 = name; if (!strcmp(name, "model" HF_ST_SUFFIX)) have_ms = true; }
    }
    *is_index = true;
    if (have_mi) { *main = "model" HF_INDEX_SUFFIX; return TBX_OK; }
    *is_index = false;
    if (have_ms) { *main = "model" HF_ST_SUFFIX; return TBX_OK; }
    if (nidx == 1) { *main = idx1; *is_index = true; return TBX_OK; }
    if (nidx > 1)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "path",
                       "directory %s holds %zu safetensors index files (%s, ...) and no "
                       "model.safetensors.index.json: open one of them by path", dir, nidx, idx1);
    if (nst == 1) { *main = st1; return TBX_OK; }
    if (nst > 1)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "path",
                       "directory %s holds %zu safetensors files (%s, ...) but no "
                       "model.safetensors and no index: open one of them by path", dir, nst, st1);
    return tbx_err(err, TBX_E_NOT_FOUND, TBX_NO_OFFSET, "path",
                   "directory %s holds no safetensors model (model.safetensors, or shards with "
                   "model.safetensors.index.json)", dir);
}

/* "P-0000K-of-0000N.safetensors": *plen = length of P, *k, *n, *kw = digits of K. */
static bool hf_series(const char *s, size_t len, size_t *plen, unsigned long *k, unsigned long *n,
                      size_t *kw) {
    size_t sl = strlen(HF_ST_SUFFIX);
    if (!ends_with(s, len, HF_ST_SUFFIX)) return false;
    size_t e = len - sl, j = e;
    while (j > 0 && s[j - 1] >= '0' && s[j - 1] <= '9') j--;
    if (j == e || e - j > 9 || j < 4 || memcmp(s + j - 4, "-of-", 4) != 0) return false;
    size_t ke = j - 4, kb = ke;
    while (kb > 0 && s[kb - 1] >= '0' && s[kb - 1] <= '9') kb--;
    if (kb == ke || ke - kb > 9 || kb == 0 || s[kb - 1] != '-') return false;
    *plen = kb - 1;
    *kw = ke - kb;
    *k = strtoul(s + kb, NULL, 10);
    *n = strtoul(s + j, NULL, 10);
    return true;
}

/* A file of the mapped shards' "P-0000K-of-0000N.safetensors" series lying in the directory
 * without any tensor mapped to it. */
static tbx_status hf_check_unmapped(st_set *s, tbx_error *err) {
    tbx_file *f = s->f;
    if (s->shards.n == 0) return TBX_OK;
    size_t plen0 = 0, kw0 = 0;
    unsigned long n0 = 0;
    for (size_t i = 0; i < s->shards.n; i++) {
        size_t plen, kw;
        unsigned long k, n;
        const char *nm = hf_key(&s->shards, i);
        if (!hf_series(nm, hf_klen(&s->shards, i), &plen, &k, &n, &kw)) return TBX_OK;
        if (i == 0) { plen0 = plen; kw0 = kw; n0 = n; continue; }
        if (plen != plen0 || kw != kw0 || n != n0 || memcmp(nm, hf_key(&s->shards, 0), plen))
            return TBX_OK;
    }
    if (n0 > HF_MAX_SHARDS || n0 <= s->shards.n) return TBX_OK;
    const char *first = hf_key(&s->shards, 0);
    size_t first_len = hf_klen(&s->shards, 0);
    size_t tail = first_len - plen0 - 1 - kw0; /* "-of-0000N.safetensors" */
    char *name = tbx_malloc(&f->al, first_len + 1);
    if (!name) return hf_nomem(s, err, "shard name");
    tbx_status st = TBX_OK;
    for (unsigned long k = 1; k <= n0 && st == TBX_OK; k++) {
        char digits[16];
        snprintf(digits, sizeof digits, "%0*lu", (int)kw0, k);
        if (strlen(digits) != kw0) break;
        memcpy(name, first, plen0 + 1);
        memcpy(name + plen0 + 1, digits, kw0);
        memcpy(name + plen0 + 1 + kw0, first + plen0 + 1 + kw0, tail);
        name[first_len] = 0;
        size_t idx;
        if (hf_keys_find(&s->shards, name, first_len, &idx)) continue;
        int kind = -1;
        st = hf_kind(f, name, "shard name", &kind, err);
        if (st != TBX_OK)
            s->index_error = true;
        else if (kind == 0)
            st = hf_ierr(s, err, TBX_E_FORMAT, s->map_at, "weight_map",
                         "shard file \"%s\" lies in the directory, but weight_map maps no tensor "
                         "to it", name);
    }
    tbx_free(&f->al, name, first_len + 1);
    return st;
}

/* Fills *err from `e` prefixed with the shard's name (its code, field and offset kept). */
static tbx_status hf_shard_err(tbx_error *err, const tbx_error *e, const char *name) {
    tbx_status st = tbx_err(err, e->code, TBX_NO_OFFSET, e->field, "%s: %s", name, e->message);
    if (err) err->offset = e->offset;
    return st;
}

static tbx_status hf_open_sharded(st_set *s, tbx_error *err) {
    tbx_file *f = s->f;
    size_t ns = s->shards.n;
    tbx_status st = TBX_OK;
    /* sources 1..ns: the shards sorted by name */
    size_t *order = tbx_calloc(&f->al, ns ? ns : 1, sizeof *order);
    s->shard_src = tbx_calloc(&f->al, ns ? ns : 1, sizeof *s->shard_src);
    if (!order || !s->shard_src) {
        tbx_free(&f->al, order, (ns ? ns : 1) * sizeof *order);
        return hf_nomem(s, err, "shard table");
    }
    char **names = tbx_calloc(&f->al, ns ? ns : 1, sizeof *names);
    if (!names) {
        tbx_free(&f->al, order, (ns ? ns : 1) * sizeof *order);
        return hf_nomem(s, err, "shard table");
    }
    for (size_t i = 0; i < ns; i++) names[i] = (char *)hf_key(&s->shards, i);
    qsort(names, ns, sizeof *names, hf_strcmp);
    for (size_t r = 0; r < ns; r++) {
        size_t id = 0;
        hf_keys_find(&s->shards, names[r], strlen(names[r]), &id);
        order[r] = id;
        s->shard_src[id] = (uint32_t)(r + 1);
    }
    tbx_free(&f->al, names, (ns ? ns : 1) * sizeof *names);
    st = tbx_file_reserve_tensors(f, s->names.n, err);
    if (st != TBX_OK) { s->index_error = true; goto done; }
    const bool use_mmap = (f->flags & TBX_OPEN_MMAP) != 0;
    for (size_t r = 0; r < ns && st == TBX_OK; r++) {
        size_t id = order[r];
        const char *sn = hf_key(&s->shards, id);
        char q[300];
        tbx_quote_bytes(q, sizeof q, sn, hf_klen(&s->shards, id), 200);
        f->part_names[r + 1] = tbx_memdup0(&f->al, sn, hf_klen(&s->shards, id));
        if (!f->part_names[r + 1]) { st = hf_nomem(s, err, "shard name"); break; }
        tbx_entry_kind kind;
        st = tbx_provider_kind(f->prov, sn, &kind, NULL, err);
        if (st == TBX_E_NOMEM) st = hf_nomem(s, err, "shard name");
        if (st != TBX_OK) { s->index_error = true; break; }
        if (kind == TBX_ENTRY_MISSING) {
            st = hf_ierr(s, err, TBX_E_NOT_FOUND, s->shard_at[id], "weight_map",
                         "weight_map names shard \"%s\", which does not exist", q);
            break;
        }
        tbx_error e;
        st = tbx_provider_open(f->prov, sn, use_mmap, &f->extra_src[r], &e);
        if (st != TBX_OK) {
            st = hf_ierr(s, err, st, s->shard_at[id], "weight_map",
                         "shard \"%s\" cannot be opened: %s", q, e.message);
            break;
        }
        s->index_error = false;
        const st_shard_check chk = {hf_check_tensor, s};
        st = st_open_source(f, &f->extra_src[r], (uint32_t)(r + 1), &chk, &e);
        if (st != TBX_OK) {
            if (s->index_error) { if (err) *err = e; }
            else st = hf_shard_err(err, &e, q);
            s->index_error = true;
        }
    }
    if (st != TBX_OK) goto done;
    /* every mapped tensor was found in its shard */
    for (size_t i = 0; i < s->names.n; i++) {
        const hf_ent *e = &s->ents[i];
        if (e->found) continue;
        char q[96];
        tbx_quote_bytes(q, sizeof q, hf_key(&s->names, i), hf_klen(&s->names, i), 64);
        st = hf_ierr(s, err, TBX_E_NOT_FOUND, e->key_at, "weight_map",
                     "weight_map maps tensor \"%s\" to \"%s\", which does not hold it", q,
                     hf_key(&s->shards, e->shard));
        goto done;
    }
    st = hf_check_unmapped(s, err);
done:
    tbx_free(&f->al, order, (ns ? ns : 1) * sizeof *order);
    return st;
}

tbx_status st_open_path(tbx_file *f, tbx_error *err) {
    const tbx_provider *prov = f->prov;
    const bool is_dir = prov->is_dir;
    const char *main = is_dir ? NULL : prov->entry;
    bool is_index = true;
    tbx_namelist top = {0}, side = {0};
    st_set s;
    memset(&s, 0, sizeof s);
    s.f = f;
    hf_keys_init(&s.names, &f->al);
    hf_keys_init(&s.shards, &f->al);
    tbx_status st;

    st = hf_readdir(f, NULL, &top, err);
    if (st != TBX_OK) goto done;
    if (is_dir) {
        st = hf_choose(f, &top, &main, &is_index, err);
        if (st != TBX_OK) goto done;
    }
    s.index_name = main;
    /* the model file: the one chosen in the directory, or the path given itself */
    st = tbx_provider_open(prov, is_dir ? main : NULL, (f->flags & TBX_OPEN_MMAP) != 0, &f->src,
                           err);
    if (st != TBX_OK) goto done;
    if (is_index) {
        st = hf_parse_index(&s, err);
        if (st != TBX_OK) goto done;
    }
    st = hf_side_files(f, &top, main, &side, err);
    if (st != TBX_OK) goto done;

    /* every source and its name: [0] main, [1..ns] shards, then the side files */
    size_t ns = s.shards.n, nx = ns + side.n;
    f->part_names = tbx_calloc(&f->al, nx + 1, sizeof *f->part_names);
    if (nx) f->extra_src = tbx_calloc(&f->al, nx, sizeof *f->extra_src);
    if (!f->part_names || (nx && !f->extra_src)) {
        tbx_free(&f->al, f->part_names, (nx + 1) * sizeof *f->part_names);
        tbx_free(&f->al, f->extra_src, nx * sizeof *f->extra_src);
        f->part_names = NULL;
        f->extra_src = NULL;
        st = tbx_err_nomem(err, "set sources");
        goto done;
    }
    for (size_t i = 0; i < nx; i++) f->extra_src[i].fd = -1;
    f->nextra_src = nx; /* tbx_close owns both arrays from here */
    f->part_names[0] = tbx_memdup0(&f->al, main, strlen(main));
    if (!f->part_names[0]) { st = tbx_err_nomem(err, "set sources"); goto done; }

    if (is_index) st = hf_open_sharded(&s, err);
    else st = st_open_source(f, &f->src, 0, NULL, err);
    if (st != TBX_OK) goto done;

    for (size_t i = 0; i < side.n; i++) {
        size_t k = ns + i;
        f->part_names[k + 1] = tbx_memdup0(&f->al, side.names[i], strlen(side.names[i]));
        if (!f->part_names[k + 1]) { st = tbx_err_nomem(err, "side file"); break; }
        st = tbx_provider_open(prov, side.names[i], false, &f->extra_src[k], err);
        if (st != TBX_OK) break;
        st = tbx_file_add_section_in(f, side.names[i], 0, (uint32_t)(k + 1), 0,
                                     f->extra_src[k].size, err);
        if (st != TBX_OK) break;
    }
    f->version = 0;
done:
    tbx_file_uncharge(f, s.charged); /* the index's tables are freed (the sources stay, small) */
    tbx_namelist_free(&f->al, &top);
    tbx_namelist_free(&f->al, &side);
    hf_keys_free(&s.names);
    hf_keys_free(&s.shards);
    tbx_free(&f->al, s.ents, s.ents_cap * sizeof *s.ents);
    tbx_free(&f->al, s.shard_at, s.shard_at_cap * sizeof *s.shard_at);
    tbx_free(&f->al, s.shard_src, (s.shards.n ? s.shards.n : 1) * sizeof *s.shard_src);
    return st;
}
