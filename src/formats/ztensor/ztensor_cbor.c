/*
 * ztensor_cbor.c - CBOR for the zTensor driver: a pull decoder, the metadata value builder and
 * the canonical encoder.
 *
 * Decoding: libcbor's streaming decoder (cbor_stream_decode) decodes exactly one data item head
 * per call and reports it through a callback; the callbacks below store it as one event
 * (zt_ev) and the driver pulls events one at a time. Nothing is sized by a declared count:
 * a definite array or map count is only checked against the bytes that remain (every element
 * takes at least one byte, every map entry two) and against the limits, and storage grows with
 * the elements actually decoded. Nesting is capped by tbx_limits.max_depth (and ZT_HARD_DEPTH),
 * strings by max_string_len, array and map entries by max_array_len.
 *
 *   CBOR item:  | major type (3 bits) | additional info (5 bits) | argument 0/1/2/4/8 B (BE) | payload
 *               0 uint  1 negint (-1-n)  2 bytes  3 text  4 array  5 map  6 tag  7 float/simple
 *
 * Values built for metadata: uint -> U64, negint -> I64 (below -2^63: unsupported), half/single/
 * double -> F16/F32/F64, text -> STRING (UTF-8 checked), bytes -> BYTES, array -> ARRAY (packed
 * when all elements are scalars of one type), map -> MAP (text keys only, duplicates rejected),
 * true/false -> BOOL, null and undefined -> NULL. Tags and the other simple values are valid
 * CBOR but not supported in values: they are refused by name (TBX_E_UNSUPPORTED), never called
 * malformed, and skipped like any item under keys the driver ignores. libcbor's decoder itself
 * refuses some of them (tags 6..20, simple values 0..19 and 32..255): zt_next decodes their
 * heads itself (wellformed_head) so they become ZT_EV_TAG / ZT_EV_SIMPLE events too.
 *
 * Encoding is canonical: definite lengths, the shortest argument encoding for every integer and
 * length, map keys sorted shortest first then bytewise. Floats keep the width of their value
 * type (F16 half, F32 single, F64 double; BF16 is written as single) so types round-trip.
 */
#include "ztensor_int.h"

#include <cbor.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Pull decoder                                                                                */
/* ------------------------------------------------------------------------------------------ */
static void ev_set(void *ctx, zt_kind k) {
    zt_cbor *c = ctx;
    c->ev.k = k;
    c->got = true;
}
static void cb_u8(void *ctx, uint8_t v) { ev_set(ctx, ZT_EV_UINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_u16(void *ctx, uint16_t v) { ev_set(ctx, ZT_EV_UINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_u32(void *ctx, uint32_t v) { ev_set(ctx, ZT_EV_UINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_u64(void *ctx, uint64_t v) { ev_set(ctx, ZT_EV_UINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_n8(void *ctx, uint8_t v) { ev_set(ctx, ZT_EV_NEGINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_n16(void *ctx, uint16_t v) { ev_set(ctx, ZT_EV_NEGINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_n32(void *ctx, uint32_t v) { ev_set(ctx, ZT_EV_NEGINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_n64(void *ctx, uint64_t v) { ev_set(ctx, ZT_EV_NEGINT); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_bytes(void *ctx, cbor_data p, size_t n) {
    zt_cbor *c = ctx;
    ev_set(ctx, ZT_EV_BYTES);
    c->ev.p = p;
    c->ev.n = n;
}
static void cb_text(void *ctx, cbor_data p, size_t n) {
    zt_cbor *c = ctx;
    ev_set(ctx, ZT_EV_TEXT);
    c->ev.p = p;
    c->ev.n = n;
}
static void cb_bytes_indef(void *ctx) { ev_set(ctx, ZT_EV_BYTES_INDEF); }
static void cb_text_indef(void *ctx) { ev_set(ctx, ZT_EV_TEXT_INDEF); }
static void cb_array(void *ctx, size_t n) { ev_set(ctx, ZT_EV_ARRAY); ((zt_cbor *)ctx)->ev.u = n; }
static void cb_array_indef(void *ctx) { ev_set(ctx, ZT_EV_ARRAY_INDEF); }
static void cb_map(void *ctx, size_t n) { ev_set(ctx, ZT_EV_MAP); ((zt_cbor *)ctx)->ev.u = n; }
static void cb_map_indef(void *ctx) { ev_set(ctx, ZT_EV_MAP_INDEF); }
static void cb_tag(void *ctx, uint64_t v) { ev_set(ctx, ZT_EV_TAG); ((zt_cbor *)ctx)->ev.u = v; }
static void cb_f2(void *ctx, float v) { ev_set(ctx, ZT_EV_F16); ((zt_cbor *)ctx)->ev.f = v; }
static void cb_f4(void *ctx, float v) { ev_set(ctx, ZT_EV_F32); ((zt_cbor *)ctx)->ev.f = v; }
static void cb_f8(void *ctx, double v) { ev_set(ctx, ZT_EV_F64); ((zt_cbor *)ctx)->ev.f = v; }
static void cb_undef(void *ctx) { ev_set(ctx, ZT_EV_UNDEF); }
static void cb_null(void *ctx) { ev_set(ctx, ZT_EV_NULL); }
static void cb_bool(void *ctx, bool b) { ev_set(ctx, ZT_EV_BOOL); ((zt_cbor *)ctx)->ev.b = b; }
static void cb_break(void *ctx) { ev_set(ctx, ZT_EV_BREAK); }

/* libcbor's callback table: every item kind is turned into one event. */
static const struct cbor_callbacks zt_callbacks = {
    .uint8 = cb_u8,
    .uint16 = cb_u16,
    .uint32 = cb_u32,
    .uint64 = cb_u64,
    .negint64 = cb_n64,
    .negint32 = cb_n32,
    .negint16 = cb_n16,
    .negint8 = cb_n8,
    .byte_string_start = cb_bytes_indef,
    .byte_string = cb_bytes,
    .string = cb_text,
    .string_start = cb_text_indef,
    .indef_array_start = cb_array_indef,
    .array_start = cb_array,
    .indef_map_start = cb_map_indef,
    .map_start = cb_map,
    .tag = cb_tag,
    .float2 = cb_f2,
    .float4 = cb_f4,
    .float8 = cb_f8,
    .undefined = cb_undef,
    .null = cb_null,
    .boolean = cb_bool,
    .indef_break = cb_break,
};

const char *zt_kind_name(zt_kind k) {
    switch (k) {
    case ZT_EV_UINT: return "unsigned integer";
    case ZT_EV_NEGINT: return "negative integer";
    case ZT_EV_BYTES: case ZT_EV_BYTES_INDEF: return "byte string";
    case ZT_EV_TEXT: case ZT_EV_TEXT_INDEF: return "text string";
    case ZT_EV_ARRAY: case ZT_EV_ARRAY_INDEF: return "array";
    case ZT_EV_MAP: case ZT_EV_MAP_INDEF: return "map";
    case ZT_EV_TAG: return "tag";
    case ZT_EV_F16: return "half float";
    case ZT_EV_F32: return "single float";
    case ZT_EV_F64: return "double float";
    case ZT_EV_NULL: return "null";
    case ZT_EV_UNDEF: return "undefined";
    case ZT_EV_BOOL: return "boolean";
    case ZT_EV_BREAK: return "break";
    case ZT_EV_SIMPLE: return "simple value";
    }
    return "?";
}

/* The kind with its article, for "got ..." messages. */
const char *zt_kind_a(zt_kind k) {
    switch (k) {
    case ZT_EV_UINT: return "an unsigned integer";
    case ZT_EV_NEGINT: return "a negative integer";
    case ZT_EV_BYTES: case ZT_EV_BYTES_INDEF: return "a byte string";
    case ZT_EV_TEXT: case ZT_EV_TEXT_INDEF: return "a text string";
    case ZT_EV_ARRAY: case ZT_EV_ARRAY_INDEF: return "an array";
    case ZT_EV_MAP: case ZT_EV_MAP_INDEF: return "a map";
    case ZT_EV_TAG: return "a tag";
    case ZT_EV_F16: return "a half float";
    case ZT_EV_F32: return "a single float";
    case ZT_EV_F64: return "a double float";
    case ZT_EV_NULL: return "null";
    case ZT_EV_UNDEF: return "undefined";
    case ZT_EV_BOOL: return "a boolean";
    case ZT_EV_BREAK: return "a break";
    case ZT_EV_SIMPLE: return "a simple value";
    }
    return "?";
}

static uint32_t depth_limit(const zt_cbor *c) {
    uint32_t d = c->lim->max_depth;
    return d < ZT_HARD_DEPTH ? d : ZT_HARD_DEPTH;
}

/* The head of a well-formed item libcbor's decoder refuses although RFC 8949 allows it: a tag
 * (major type 6, argument in the initial byte or 1/2/4/8 bytes that follow) or a simple value
 * (major type 7: 0..19 in the initial byte, 32..255 in one following byte; 24..31 there is not
 * well-formed). Fills ev and *used and returns 1; 0: malformed; -1: the head runs past `n`. */
static int wellformed_head(const uint8_t *p, size_t n, zt_ev *ev, size_t *used) {
    unsigned major = p[0] >> 5, ai = p[0] & 0x1f;
    if (major == 7) {
        if (ai < 20) { ev->k = ZT_EV_SIMPLE; ev->u = ai; *used = 1; return 1; }
        if (ai != 24) return 0;
        if (n < 2) return -1;
        if (p[1] < 32) return 0;
        ev->k = ZT_EV_SIMPLE;
        ev->u = p[1];
        *used = 2;
        return 1;
    }
    if (major != 6 || ai > 27) return 0;
    size_t extra = ai < 24 ? 0 : (size_t)1 << (ai - 24);
    if (n < 1 + extra) return -1;
    uint64_t v = ai < 24 ? ai : 0;
    for (size_t i = 0; i < extra; i++) v = v << 8 | p[1 + i];
    ev->k = ZT_EV_TAG;
    ev->u = v;
    *used = 1 + extra;
    return 1;
}

tbx_status zt_next(zt_cbor *c, zt_ev *ev, const char *field, tbx_error *err) {
    uint64_t off = c->base + c->pos;
    if (c->pos >= c->len)
        return tbx_err(err, TBX_E_TRUNCATED, off, field,
                       "%s: the manifest ends (%zu bytes) where a CBOR item is expected",
                       field, c->len);
    memset(&c->ev, 0, sizeof c->ev);
    c->got = false;
    struct cbor_decoder_result r = cbor_stream_decode(c->buf + c->pos, c->len - c->pos, &zt_callbacks, c);
    unsigned ib = c->buf[c->pos];
    if (r.status == CBOR_DECODER_NEDATA)
        return tbx_err(err, TBX_E_TRUNCATED, off, field,
                       "%s: CBOR item (initial byte 0x%02x) needs %zu bytes, only %zu remain in "
                       "the manifest", field, ib, r.required, c->len - c->pos);
    if (r.status != CBOR_DECODER_FINISHED || !c->got || r.read == 0 || r.read > c->len - c->pos) {
        memset(&c->ev, 0, sizeof c->ev);
        size_t used = 0;
        int wf = wellformed_head(c->buf + c->pos, c->len - c->pos, &c->ev, &used);
        if (wf < 0)
            return tbx_err(err, TBX_E_TRUNCATED, off, field,
                           "%s: CBOR item (initial byte 0x%02x) runs past the end of the "
                           "manifest", field, ib);
        if (wf == 0)
            return tbx_err(err, TBX_E_FORMAT, off, field,
                           "%s: malformed CBOR item (initial byte 0x%02x)", field, ib);
        r.read = used;
    }
    c->ev.off = off;
    c->pos += r.read;
    *ev = c->ev;
    return TBX_OK;
}

void zt_str_free(zt_cbor *c, zt_str *s) {
    if (s->owned) tbx_free(c->al, s->owned, s->owned_cap);
    memset(s, 0, sizeof *s);
}

tbx_status zt_read_str(zt_cbor *c, const zt_ev *ev, zt_kind want, zt_str *out,
                       const char *field, tbx_error *err) {
    memset(out, 0, sizeof *out);
    zt_kind indef = want == ZT_EV_TEXT ? ZT_EV_TEXT_INDEF : ZT_EV_BYTES_INDEF;
    uint64_t max = c->lim->max_string_len;
    if (ev->k == want) {
        if (ev->n > max)
            return tbx_err(err, TBX_E_LIMIT, ev->off, field,
                           "%s: %s of %zu bytes exceeds max_string_len = %" PRIu64, field,
                           zt_kind_name(want), ev->n, max);
        out->p = (const char *)ev->p;
        out->n = ev->n;
    } else if (ev->k == indef) {
        for (;;) {
            zt_ev ch;
            tbx_status st = zt_next(c, &ch, field, err);
            if (st != TBX_OK) { zt_str_free(c, out); return st; }
            if (ch.k == ZT_EV_BREAK) break;
            if (ch.k != want) {
                zt_str_free(c, out);
                return tbx_err(err, TBX_E_FORMAT, ch.off, field,
                               "%s: a chunk of an indefinite-length %s must be a definite %s, "
                               "got %s", field, zt_kind_name(want), zt_kind_name(want),
                               zt_kind_a(ch.k));
            }
            if (ch.n > max || out->n > max - ch.n) {
                zt_str_free(c, out);
                return tbx_err(err, TBX_E_LIMIT, ch.off, field,
                               "%s: indefinite-length %s longer than max_string_len = %" PRIu64,
                               field, zt_kind_name(want), max);
            }
            if (ch.n) {
                size_t need = out->n + ch.n + 1;
                if (need > out->owned_cap) {
                    size_t cap = out->owned_cap ? out->owned_cap : 64;
                    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
                    char *p = tbx_realloc(c->al, out->owned, out->owned_cap, cap);
                    if (!p) { zt_str_free(c, out); return tbx_err_nomem(err, "manifest string"); }
                    out->owned = p;
                    out->owned_cap = cap;
                }
                memcpy(out->owned + out->n, ch.p, ch.n);
                out->n += ch.n;
                out->owned[out->n] = 0;
            }
        }
        out->p = out->owned ? out->owned : "";
    } else {
        return tbx_err(err, TBX_E_FORMAT, ev->off, field, "%s: expected %s, got %s", field,
                       zt_kind_a(want), zt_kind_a(ev->k));
    }
    size_t bad = 0;
    if (want == ZT_EV_TEXT && !tbx_utf8_valid(out->p, out->n, &bad)) {
        uint64_t at = ev->off;
        zt_str_free(c, out);
        return tbx_err(err, TBX_E_FORMAT, at, field,
                       "%s: text string is not valid UTF-8 (byte %zu of the string)", field, bad);
    }
    return TBX_OK;
}

tbx_status zt_iter_begin(zt_cbor *c, const zt_ev *ev, bool is_map, zt_iter *it,
                         const char *field, tbx_error *err) {
    memset(it, 0, sizeof *it);
    zt_kind def = is_map ? ZT_EV_MAP : ZT_EV_ARRAY;
    zt_kind indef = is_map ? ZT_EV_MAP_INDEF : ZT_EV_ARRAY_INDEF;
    if (ev->k == indef) {
        it->indef = true;
        return TBX_OK;
    }
    if (ev->k != def)
        return tbx_err(err, TBX_E_FORMAT, ev->off, field, "%s: expected %s, got %s", field,
                       is_map ? "a map" : "an array", zt_kind_a(ev->k));
    uint64_t remaining = c->len - c->pos;
    uint64_t per = is_map ? 2 : 1;
    if (ev->u > remaining / per)
        return tbx_err(err, TBX_E_TRUNCATED, ev->off, field,
                       "%s: %s declares %" PRIu64 " %s but only %" PRIu64
                       " bytes of the manifest remain", field, is_map ? "map" : "array", ev->u,
                       is_map ? "entries" : "elements", remaining);
    it->left = ev->u;
    return TBX_OK;
}

tbx_status zt_iter_next(zt_cbor *c, zt_iter *it, zt_ev *ev, bool *more, const char *field,
                        tbx_error *err) {
    *more = false;
    if (!it->indef) {
        if (it->left == 0) return TBX_OK;
        it->left--;
        tbx_status st = zt_next(c, ev, field, err);
        if (st != TBX_OK) return st;
        if (ev->k == ZT_EV_BREAK)
            return tbx_err(err, TBX_E_FORMAT, ev->off, field,
                           "%s: unexpected break (0xff) inside a definite-length container",
                           field);
    } else {
        tbx_status st = zt_next(c, ev, field, err);
        if (st != TBX_OK) return st;
        if (ev->k == ZT_EV_BREAK) return TBX_OK;
    }
    it->count++;
    *more = true;
    return TBX_OK;
}

tbx_status zt_skip(zt_cbor *c, const zt_ev *ev, uint32_t depth, tbx_error *err) {
    const char *field = "manifest";
    switch (ev->k) {
    case ZT_EV_BYTES: case ZT_EV_BYTES_INDEF: case ZT_EV_TEXT: case ZT_EV_TEXT_INDEF: {
        zt_str s;
        zt_kind want = (ev->k == ZT_EV_TEXT || ev->k == ZT_EV_TEXT_INDEF) ? ZT_EV_TEXT : ZT_EV_BYTES;
        tbx_status st = zt_read_str(c, ev, want, &s, field, err);
        zt_str_free(c, &s);
        return st;
    }
    case ZT_EV_TAG: case ZT_EV_ARRAY: case ZT_EV_ARRAY_INDEF: case ZT_EV_MAP: case ZT_EV_MAP_INDEF:
        break;
    case ZT_EV_BREAK:
        return tbx_err(err, TBX_E_FORMAT, ev->off, field, "%s: unexpected break (0xff)", field);
    default:
        return TBX_OK;
    }
    if (depth + 1 > depth_limit(c))
        return tbx_err(err, TBX_E_LIMIT, ev->off, field,
                       "%s: CBOR nesting deeper than %u (limit max_depth)", field, depth_limit(c));
    tbx_status st;
    zt_ev e;
    if (ev->k == ZT_EV_TAG) {
        st = zt_next(c, &e, field, err);
        return st != TBX_OK ? st : zt_skip(c, &e, depth + 1, err);
    }
    bool is_map = ev->k == ZT_EV_MAP || ev->k == ZT_EV_MAP_INDEF;
    zt_iter it;
    st = zt_iter_begin(c, ev, is_map, &it, field, err);
    for (bool more = true; st == TBX_OK;) {
        st = zt_iter_next(c, &it, &e, &more, field, err);
        if (st != TBX_OK || !more) break;
        st = zt_skip(c, &e, depth + 1, err);
        if (st == TBX_OK && is_map) {
            st = zt_next(c, &e, field, err);
            if (st == TBX_OK && e.k == ZT_EV_BREAK)
                st = tbx_err(err, TBX_E_FORMAT, e.off, field, "%s: map key without a value",
                             field);
            if (st == TBX_OK) st = zt_skip(c, &e, depth + 1, err);
        }
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata values                                                                             */
/* ------------------------------------------------------------------------------------------ */
typedef struct zt_scalar {
    tbx_value_type t;   /* BOOL, U64, I64, F16, F32, F64; NULL: not a packable scalar */
    uint64_t u;
    int64_t i;
    double f;
} zt_scalar;

static size_t pk_size(tbx_value_type t) {
    switch (t) {
    case TBX_V_BOOL: return 1;
    case TBX_V_F16: return 2;
    case TBX_V_F32: return 4;
    case TBX_V_U64: case TBX_V_I64: case TBX_V_F64: return 8;
    default: return 0;
    }
}

/* The scalar of an event (integers checked), or t = TBX_V_NULL for non-packable items. */
static tbx_status ev_scalar(const zt_ev *ev, zt_scalar *s, tbx_error *err) {
    memset(s, 0, sizeof *s);
    s->t = TBX_V_NULL;
    switch (ev->k) {
    case ZT_EV_UINT: s->t = TBX_V_U64; s->u = ev->u; break;
    case ZT_EV_NEGINT:
        if (ev->u > (uint64_t)INT64_MAX)
            return tbx_err(err, TBX_E_UNSUPPORTED, ev->off, "attributes",
                           "attributes: integer -1-%" PRIu64 " is below -2^63, which tensorbox "
                           "cannot represent", ev->u);
        s->t = TBX_V_I64;
        s->i = -1 - (int64_t)ev->u;
        break;
    case ZT_EV_F16: s->t = TBX_V_F16; s->f = ev->f; break;
    case ZT_EV_F32: s->t = TBX_V_F32; s->f = ev->f; break;
    case ZT_EV_F64: s->t = TBX_V_F64; s->f = ev->f; break;
    case ZT_EV_BOOL: s->t = TBX_V_BOOL; s->u = ev->b ? 1 : 0; break;
    default: break;
    }
    return TBX_OK;
}

static tbx_value *scalar_value(const tbx_alloc *al, const zt_scalar *s) {
    tbx_value *v = tbx_val_new(al, s->t);
    if (!v) return NULL;
    if (s->t == TBX_V_I64) v->v.i = s->i;
    else if (s->t == TBX_V_BOOL || s->t == TBX_V_U64) v->v.u = s->u;
    else v->v.f = s->f;
    return v;
}

static void pk_store(uint8_t *p, const zt_scalar *s) {
    switch (s->t) {
    case TBX_V_BOOL: p[0] = (uint8_t)s->u; break;
    case TBX_V_U64: memcpy(p, &s->u, 8); break;
    case TBX_V_I64: memcpy(p, &s->i, 8); break;
    case TBX_V_F16: { uint16_t h = tbx_f32_to_f16((float)s->f); memcpy(p, &h, 2); break; }
    case TBX_V_F32: { float x = (float)s->f; memcpy(p, &x, 4); break; }
    case TBX_V_F64: memcpy(p, &s->f, 8); break;
    default: break;
    }
}

static void pk_load(const uint8_t *p, tbx_value_type t, zt_scalar *s) {
    memset(s, 0, sizeof *s);
    s->t = t;
    switch (t) {
    case TBX_V_BOOL: s->u = p[0]; break;
    case TBX_V_U64: memcpy(&s->u, p, 8); break;
    case TBX_V_I64: memcpy(&s->i, p, 8); break;
    case TBX_V_F16: { uint16_t h; memcpy(&h, p, 2); s->f = tbx_f16_to_f32(h); break; }
    case TBX_V_F32: { float x; memcpy(&x, p, 4); s->f = x; break; }
    case TBX_V_F64: memcpy(&s->f, p, 8); break;
    default: break;
    }
}

/* Turns a packed array into pointer items (an element of another type arrived). */
static tbx_status arr_unpack(tbx_value *a) {
    const tbx_alloc *al = a->al;
    size_t es = pk_size(a->elem), cap = a->v.a.cap, n = a->v.a.n;
    tbx_value **items = tbx_calloc(al, cap, sizeof *items);
    if (!items) return TBX_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        zt_scalar s;
        pk_load((const uint8_t *)a->v.a.packed + i * es, a->elem, &s);
        items[i] = scalar_value(al, &s);
        if (!items[i]) {
            for (size_t j = 0; j < i; j++) tbx_val_free(items[j]);
            tbx_free(al, items, cap * sizeof *items);
            return TBX_E_NOMEM;
        }
    }
    tbx_free(al, a->v.a.packed, cap * es);
    a->v.a.packed = NULL;
    a->v.a.items = items;
    a->elem = TBX_V_NULL;
    return TBX_OK;
}

/* Room for one more element in whichever storage the array uses. */
static tbx_status arr_room(tbx_value *a) {
    if (a->v.a.n < a->v.a.cap) return TBX_OK;
    const tbx_alloc *al = a->al;
    size_t cap = a->v.a.cap, ncap = cap ? cap * 2 : 8;
    if (ncap > SIZE_MAX / 16) return TBX_E_NOMEM;
    if (a->v.a.packed) {
        size_t es = pk_size(a->elem);
        void *p = tbx_realloc(al, a->v.a.packed, cap * es, ncap * es);
        if (!p) return TBX_E_NOMEM;
        a->v.a.packed = p;
    } else {
        tbx_value **p = tbx_realloc(al, a->v.a.items, cap * sizeof *p, ncap * sizeof *p);
        if (!p) return TBX_E_NOMEM;
        a->v.a.items = p;
    }
    a->v.a.cap = ncap;
    return TBX_OK;
}

/* Can integer s join packed array a, whose elements are U64 or I64 (CBOR's unsigned and
 * negative integers)? A signed array takes an unsigned value up to INT64_MAX (as I64); an
 * unsigned array whose values are all at most INT64_MAX becomes signed for a negative one (the
 * same 8 bytes). True: *s (and a's element type) are set so that s packs as it is. An array of
 * alternating signs (what a GGUF int32 array becomes) then stays 8 bytes an element. */
static bool int_packs(tbx_value *a, zt_scalar *s) {
    if (a->elem == TBX_V_I64 && s->t == TBX_V_U64 && s->u <= (uint64_t)INT64_MAX) {
        s->i = (int64_t)s->u;
        s->t = TBX_V_I64;
        return true;
    }
    if (a->elem == TBX_V_U64 && s->t == TBX_V_I64) {
        const uint64_t *p = a->v.a.packed;
        for (size_t i = 0; i < a->v.a.n; i++) {
            uint64_t u;
            memcpy(&u, p + i, 8);
            if (u > (uint64_t)INT64_MAX) return false;
        }
        a->elem = TBX_V_I64;
        return true;
    }
    return false;
}

static tbx_status arr_push_scalar(tbx_value *a, const zt_scalar *s) {
    const tbx_alloc *al = a->al;
    if (a->v.a.n == 0 && !a->v.a.items && !a->v.a.packed) {
        a->elem = s->t;
        size_t es = pk_size(s->t);
        a->v.a.packed = tbx_malloc(al, 8 * es);
        if (!a->v.a.packed) return TBX_E_NOMEM;
        a->v.a.cap = 8;
    }
    if (a->v.a.packed && a->elem == s->t) {
        tbx_status st = arr_room(a);
        if (st != TBX_OK) return st;
        pk_store((uint8_t *)a->v.a.packed + a->v.a.n * pk_size(s->t), s);
        a->v.a.n++;
        return TBX_OK;
    }
    if (a->v.a.packed) {
        tbx_status st = arr_unpack(a);
        if (st != TBX_OK) return st;
    }
    tbx_status st = arr_room(a);
    if (st != TBX_OK) return st;
    tbx_value *v = scalar_value(al, s);
    if (!v) return TBX_E_NOMEM;
    a->v.a.items[a->v.a.n++] = v;
    return TBX_OK;
}

/* Turns a compact string array into pointer items (a non-string element arrived). */
static tbx_status str_arr_unpack(tbx_value *a) {
    const tbx_alloc *al = a->al;
    size_t cap = a->v.a.cap, n = a->v.a.n;
    tbx_value **items = tbx_calloc(al, cap ? cap : 1, sizeof *items);
    if (!items) return TBX_E_NOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = tbx_value_str_at(a, i, &len);
        items[i] = tbx_val_string(al, TBX_V_STRING, p, len);
        if (!items[i]) {
            for (size_t j = 0; j < i; j++) tbx_val_free(items[j]);
            tbx_free(al, items, (cap ? cap : 1) * sizeof *items);
            return TBX_E_NOMEM;
        }
    }
    tbx_free(al, a->v.a.soff, (cap + 1) * a->v.a.soff_w);
    tbx_free(al, a->v.a.sblob, a->v.a.sblob_cap);
    a->v.a.soff = NULL;
    a->v.a.sblob = NULL;
    a->v.a.sblob_len = a->v.a.sblob_cap = 0;
    a->v.a.items = items;
    a->v.a.cap = cap ? cap : 1;
    a->elem = TBX_V_NULL;
    return TBX_OK;
}

/* Takes ownership of item. */
static tbx_status arr_push_item(tbx_value *a, tbx_value *item) {
    tbx_status st = TBX_OK;
    if (a->v.a.packed) st = arr_unpack(a);
    if (st == TBX_OK) st = arr_room(a);
    if (st != TBX_OK) { tbx_val_free(item); return st; }
    a->v.a.items[a->v.a.n++] = item;
    return TBX_OK;
}

static const char *map_key_of(const void *ctx, uint64_t i, size_t *len) {
    const tbx_value *m = ctx;
    *len = m->v.a.key_lens[i];
    return m->v.a.keys[i];
}

/* Appends (key, item) to a MAP under construction; takes ownership of item. */
static tbx_status map_put(tbx_value *m, tbx_names *names, const zt_str *key, tbx_value *item,
                          uint64_t off, tbx_error *err) {
    const tbx_alloc *al = m->al;
    if (m->v.a.n == m->v.a.cap) {
        size_t cap = m->v.a.cap, ncap = cap ? cap * 2 : 8;
        tbx_value **items = tbx_calloc(al, ncap, sizeof *items);
        char **keys = tbx_calloc(al, ncap, sizeof *keys);
        size_t *lens = tbx_calloc(al, ncap, sizeof *lens);
        if (!items || !keys || !lens) {
            tbx_free(al, items, items ? ncap * sizeof *items : 0);
            tbx_free(al, keys, keys ? ncap * sizeof *keys : 0);
            tbx_free(al, lens, lens ? ncap * sizeof *lens : 0);
            tbx_val_free(item);
            return tbx_err_nomem(err, "attribute map");
        }
        if (m->v.a.n) {
            memcpy(items, m->v.a.items, m->v.a.n * sizeof *items);
            memcpy(keys, m->v.a.keys, m->v.a.n * sizeof *keys);
            memcpy(lens, m->v.a.key_lens, m->v.a.n * sizeof *lens);
        }
        tbx_free(al, m->v.a.items, cap * sizeof *items);
        tbx_free(al, m->v.a.keys, cap * sizeof *keys);
        tbx_free(al, m->v.a.key_lens, cap * sizeof *lens);
        m->v.a.items = items;
        m->v.a.keys = keys;
        m->v.a.key_lens = lens;
        m->v.a.cap = ncap;
    }
    char *k = tbx_memdup0(al, key->p, key->n);
    if (!k) { tbx_val_free(item); return tbx_err_nomem(err, "attribute key"); }
    size_t i = m->v.a.n;
    m->v.a.keys[i] = k;
    m->v.a.key_lens[i] = key->n;
    uint64_t earlier = 0;
    tbx_status st = tbx_names_insert(names, i, &earlier);
    if (st != TBX_OK) {
        tbx_free(al, k, key->n + 1);
        m->v.a.keys[i] = NULL;
        tbx_val_free(item);
        if (st == TBX_E_NOMEM) return tbx_err_nomem(err, "attribute key index");
        char q[96];
        tbx_quote_bytes(q, sizeof q, key->p, key->n, 64);
        return tbx_err(err, TBX_E_DUPLICATE, off, "attributes",
                       "attributes: duplicate map key \"%s\"", q);
    }
    m->v.a.items[i] = item;
    m->v.a.n = i + 1;
    return TBX_OK;
}

/* Bytes a value being built will hold (strings, packed elements, keys), charged to the
 * handle's amplification budget before they are allocated: one CBOR byte can become eight
 * (a packed integer) or a hundred and fifty (a node). */
static tbx_status bytes(zt_cbor *c, uint64_t n, uint64_t off, tbx_error *err) {
    return c->f ? tbx_file_charge_pending(c->f, n, off, "attributes", err) : TBX_OK;
}

/* Every metadata value node costs ~100 bytes of memory whatever its CBOR size (1 byte for a
 * null or an empty string): a budget keeps that proportional to the manifest. */
static tbx_status charge(zt_cbor *c, uint64_t n, uint64_t off, tbx_error *err) {
    c->nodes += n;
    if (c->nodes > c->node_budget)
        return tbx_err(err, TBX_E_LIMIT, off, "attributes",
                       "attributes: more than %" PRIu64 " values (at most one per 8 manifest "
                       "bytes beyond the first 1000000)", c->node_budget);
    /* and the handle's budget: a node and its slot in its array or map */
    return bytes(c, n * (sizeof(tbx_value) + TBX_HEAP_OVERHEAD + sizeof(tbx_value *)), off, err);
}

tbx_status zt_value(zt_cbor *c, const zt_ev *ev, uint32_t depth, tbx_value **out,
                    tbx_error *err) {
    const char *field = "attributes";
    const tbx_alloc *al = c->al;
    *out = NULL;
    zt_scalar s;
    tbx_status st = ev_scalar(ev, &s, err);
    if (st != TBX_OK) return st;
    st = charge(c, 1, ev->off, err);
    if (st != TBX_OK) return st;
    if (s.t != TBX_V_NULL) {
        *out = scalar_value(al, &s);
        return *out ? TBX_OK : tbx_err_nomem(err, "attribute value");
    }
    switch (ev->k) {
    case ZT_EV_NULL: case ZT_EV_UNDEF:
        *out = tbx_val_new(al, TBX_V_NULL);
        return *out ? TBX_OK : tbx_err_nomem(err, "attribute value");
    case ZT_EV_TEXT: case ZT_EV_TEXT_INDEF: case ZT_EV_BYTES: case ZT_EV_BYTES_INDEF: {
        bool text = ev->k == ZT_EV_TEXT || ev->k == ZT_EV_TEXT_INDEF;
        zt_str str;
        st = zt_read_str(c, ev, text ? ZT_EV_TEXT : ZT_EV_BYTES, &str, field, err);
        if (st == TBX_OK) st = bytes(c, str.n + 1 + TBX_HEAP_OVERHEAD, ev->off, err);
        if (st != TBX_OK) { zt_str_free(c, &str); return st; }
        *out = tbx_val_string(al, text ? TBX_V_STRING : TBX_V_BYTES, str.p, str.n);
        zt_str_free(c, &str);
        return *out ? TBX_OK : tbx_err_nomem(err, "attribute string");
    }
    case ZT_EV_TAG:
        return tbx_err(err, TBX_E_UNSUPPORTED, ev->off, field,
                       "%s: CBOR tag %" PRIu64 " (valid CBOR) is not supported in attribute "
                       "values", field, ev->u);
    case ZT_EV_SIMPLE:
        return tbx_err(err, TBX_E_UNSUPPORTED, ev->off, field,
                       "%s: CBOR simple value %" PRIu64 " (valid CBOR, unassigned) is not "
                       "supported in attribute values", field, ev->u);
    case ZT_EV_BREAK:
        return tbx_err(err, TBX_E_FORMAT, ev->off, field, "%s: unexpected break (0xff)", field);
    default:
        break;
    }
    /* array or map */
    bool is_map = ev->k == ZT_EV_MAP || ev->k == ZT_EV_MAP_INDEF;
    if (depth + 1 > depth_limit(c))
        return tbx_err(err, TBX_E_LIMIT, ev->off, field,
                       "%s: value nesting deeper than %u (limit max_depth)", field,
                       depth_limit(c));
    zt_iter it;
    st = zt_iter_begin(c, ev, is_map, &it, field, err);
    if (st != TBX_OK) return st;
    uint64_t maxn = c->lim->max_array_len;
    if (!it.indef && it.left > maxn)
        return tbx_err(err, TBX_E_LIMIT, ev->off, field,
                       "%s: %s of %" PRIu64 " entries exceeds max_array_len = %" PRIu64, field,
                       is_map ? "map" : "array", it.left, maxn);
    tbx_value *v = tbx_val_new(al, is_map ? TBX_V_MAP : TBX_V_ARRAY);
    if (!v) return tbx_err_nomem(err, "attribute value");
    tbx_names names;
    tbx_names_init(&names, al, map_key_of, v);
    for (bool more = true; st == TBX_OK;) {
        zt_ev e;
        st = zt_iter_next(c, &it, &e, &more, field, err);
        if (st != TBX_OK || !more) break;
        if (it.count > maxn) {
            st = tbx_err(err, TBX_E_LIMIT, e.off, field,
                         "%s: %s with more than %" PRIu64 " entries (limit max_array_len)", field,
                         is_map ? "map" : "array", maxn);
            break;
        }
        if (is_map) {
            zt_str key;
            st = charge(c, 1, e.off, err); /* the key */
            if (st == TBX_OK) st = zt_read_str(c, &e, ZT_EV_TEXT, &key, "attributes.key", err);
            if (st != TBX_OK) break;
            /* its copy, its slots in the key and length arrays, its slot in the key index */
            st = bytes(c, key.n + 1 + TBX_HEAP_OVERHEAD + 2 * sizeof(void *) + 16, e.off, err);
            if (st != TBX_OK) { zt_str_free(c, &key); break; }
            zt_ev ve;
            st = zt_next(c, &ve, field, err);
            if (st == TBX_OK && ve.k == ZT_EV_BREAK)
                st = tbx_err(err, TBX_E_FORMAT, ve.off, field, "%s: map key without a value",
                             field);
            tbx_value *item = NULL;
            if (st == TBX_OK) st = zt_value(c, &ve, depth + 1, &item, err);
            if (st == TBX_OK) st = map_put(v, &names, &key, item, e.off, err);
            zt_str_free(c, &key);
        } else {
            bool is_text = e.k == ZT_EV_TEXT || e.k == ZT_EV_TEXT_INDEF;
            if (is_text && !it.indef && v->v.a.n == 0 && !v->v.a.items && !v->v.a.packed &&
                !v->v.a.soff) {
                /* an array that starts with a string: strings stored compactly (offsets and
                 * one blob, no value node per string), like GGUF string arrays. The declared
                 * count is bounded by the manifest bytes left (one byte per item at least). */
                tbx_value *sa = tbx_val_str_array(al, (size_t)(it.count + it.left), c->len);
                if (!sa) { st = tbx_err_nomem(err, "attribute string array"); break; }
                tbx_val_free(v);
                v = sa;
            }
            if (is_text && v->v.a.soff) {
                zt_str str;
                st = zt_read_str(c, &e, ZT_EV_TEXT, &str, field, err);
                if (st == TBX_OK) st = bytes(c, str.n + 1 + v->v.a.soff_w, e.off, err);
                if (st != TBX_OK) { zt_str_free(c, &str); break; }
                char *dst = tbx_val_str_array_add(v, str.n);
                if (dst && str.n) memcpy(dst, str.p, str.n);
                zt_str_free(c, &str);
                if (!dst) { st = tbx_err_nomem(err, "attribute string array"); break; }
                continue;
            }
            if (v->v.a.soff) {
                /* a mixed array after all: every string becomes a value node */
                st = charge(c, v->v.a.n, e.off, err);
                if (st == TBX_OK) st = str_arr_unpack(v);
                if (st == TBX_E_NOMEM) st = tbx_err_nomem(err, "attribute array");
                if (st != TBX_OK) break;
            }
            st = ev_scalar(&e, &s, err);
            if (st != TBX_OK) break;
            if (s.t != TBX_V_NULL) {
                bool packs = (v->v.a.n == 0 && !v->v.a.items && !v->v.a.packed) ||
                             (v->v.a.packed && (v->elem == s.t || int_packs(v, &s)));
                if (!packs) st = charge(c, 1 + (v->v.a.packed ? v->v.a.n : 0), e.off, err);
                else st = bytes(c, 8, e.off, err); /* a packed element (at most 8 bytes) */
                if (st != TBX_OK) break;
                st = arr_push_scalar(v, &s);
                if (st == TBX_E_NOMEM) st = tbx_err_nomem(err, "attribute array");
            } else {
                tbx_value *item = NULL;
                st = zt_value(c, &e, depth + 1, &item, err);
                if (st == TBX_OK) {
                    st = arr_push_item(v, item);
                    if (st == TBX_E_NOMEM) st = tbx_err_nomem(err, "attribute array");
                }
            }
        }
    }
    tbx_names_free(&names);
    if (st != TBX_OK) { tbx_val_free(v); return st; }
    if (v->v.a.soff) tbx_val_str_array_done(v);
    *out = v;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Encoder                                                                                     */
/* ------------------------------------------------------------------------------------------ */
void zt_buf_free(zt_buf *b) {
    tbx_free(b->al, b->p, b->cap);
    b->p = NULL;
    b->n = b->cap = 0;
}

void zt_buf_flush(zt_buf *b) {
    if (b->oom || b->n == 0 || !b->out) return;
    tbx_status st = tbx_out_pwrite(b->out, b->base, b->p, b->n, b->err);
    if (st != TBX_OK) { b->oom = true; b->wst = st; return; }
    b->base += b->n;
    b->n = 0;
}

void zt_put_raw(zt_buf *b, const void *p, size_t n) {
    if (b->oom || n == 0) return;
    if (b->out && b->n >= ZT_BUF_FLUSH) {
        zt_buf_flush(b);
        if (b->oom) return;
    }
    if (n > SIZE_MAX - b->n) { b->oom = true; return; }
    size_t need = b->n + n;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        uint8_t *q = tbx_realloc(b->al, b->p, b->cap, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void zt_put_head(zt_buf *b, unsigned major, uint64_t v) {
    uint8_t h[9];
    size_t n;
    uint8_t mt = (uint8_t)(major << 5);
    if (v < 24) { h[0] = (uint8_t)(mt | v); n = 1; }
    else if (v <= 0xFF) { h[0] = mt | 24; h[1] = (uint8_t)v; n = 2; }
    else if (v <= 0xFFFF) { h[0] = mt | 25; h[1] = (uint8_t)(v >> 8); h[2] = (uint8_t)v; n = 3; }
    else if (v <= 0xFFFFFFFFu) {
        h[0] = mt | 26;
        for (int i = 0; i < 4; i++) h[1 + i] = (uint8_t)(v >> (24 - 8 * i));
        n = 5;
    } else {
        h[0] = mt | 27;
        for (int i = 0; i < 8; i++) h[1 + i] = (uint8_t)(v >> (56 - 8 * i));
        n = 9;
    }
    zt_put_raw(b, h, n);
}

void zt_put_text(zt_buf *b, const char *s, size_t n) {
    zt_put_head(b, 3, n);
    zt_put_raw(b, s, n);
}

void zt_put_textz(zt_buf *b, const char *s) { zt_put_text(b, s, strlen(s)); }

int zt_key_cmp(const char *a, size_t an, const char *b, size_t bn) {
    if (an != bn) return an < bn ? -1 : 1;
    return an ? memcmp(a, b, an) : 0;
}

static void put_f16(zt_buf *b, uint16_t h) {
    uint8_t x[3] = {0xF9, (uint8_t)(h >> 8), (uint8_t)h};
    zt_put_raw(b, x, 3);
}
static void put_f32(zt_buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t x[5] = {0xFA, (uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u};
    zt_put_raw(b, x, 5);
}
static void put_f64(zt_buf *b, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    uint8_t x[9];
    x[0] = 0xFB;
    for (int i = 0; i < 8; i++) x[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    zt_put_raw(b, x, 9);
}
static void put_int(zt_buf *b, int64_t i) {
    if (i >= 0) zt_put_head(b, 0, (uint64_t)i);
    else zt_put_head(b, 1, (uint64_t)(-(i + 1)));
}

tbx_status zt_check_value(const tbx_value *v, uint32_t depth, const char *what, tbx_error *err) {
    size_t bad = 0;
    if (!v) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata", "%s: NULL value", what);
    if (depth > ZT_HARD_DEPTH)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "metadata",
                       "%s: value nested deeper than %u levels", what, ZT_HARD_DEPTH);
    switch (v->type) {
    case TBX_V_NDARRAY: case TBX_V_BITSET:
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "%s: zTensor attributes cannot store a %s value", what,
                       tbx_value_type_name(v->type));
    case TBX_V_STRING:
        if (!tbx_utf8_valid(v->v.s.p, v->v.s.n, &bad))
            return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                           "%s: string is not valid UTF-8 (byte %zu); CBOR text must be", what,
                           bad);
        return TBX_OK;
    case TBX_V_ARRAY:
        if (v->v.a.soff) {
            for (size_t i = 0; i < v->v.a.n; i++) {
                size_t len;
                const char *sp = tbx_value_str_at(v, i, &len);
                if (!tbx_utf8_valid(sp, len, &bad))
                    return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                                   "%s: string is not valid UTF-8 (byte %zu); CBOR text must be",
                                   what, bad);
            }
            return TBX_OK;
        }
        if (v->v.a.packed || !v->v.a.items) return TBX_OK;
        for (size_t i = 0; i < v->v.a.n; i++) {
            tbx_status st = zt_check_value(v->v.a.items[i], depth + 1, what, err);
            if (st != TBX_OK) return st;
        }
        return TBX_OK;
    case TBX_V_MAP:
        for (size_t i = 0; i < v->v.a.n; i++) {
            if (!tbx_utf8_valid(v->v.a.keys[i], v->v.a.key_lens[i], &bad))
                return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                               "%s: map key is not valid UTF-8 (byte %zu)", what, bad);
            tbx_status st = zt_check_value(v->v.a.items[i], depth + 1, what, err);
            if (st != TBX_OK) return st;
        }
        return TBX_OK;
    default:
        return TBX_OK;
    }
}

/* Element i of a packed array, encoded. */
static void put_packed(zt_buf *b, tbx_value_type t, const uint8_t *p) {
    switch (t) {
    case TBX_V_BOOL: zt_put_raw(b, p[0] ? "\xF5" : "\xF4", 1); break;
    case TBX_V_U8: zt_put_head(b, 0, p[0]); break;
    case TBX_V_I8: put_int(b, (int8_t)p[0]); break;
    case TBX_V_U16: { uint16_t x; memcpy(&x, p, 2); zt_put_head(b, 0, x); break; }
    case TBX_V_I16: { int16_t x; memcpy(&x, p, 2); put_int(b, x); break; }
    case TBX_V_U32: { uint32_t x; memcpy(&x, p, 4); zt_put_head(b, 0, x); break; }
    case TBX_V_I32: { int32_t x; memcpy(&x, p, 4); put_int(b, x); break; }
    case TBX_V_U64: { uint64_t x; memcpy(&x, p, 8); zt_put_head(b, 0, x); break; }
    case TBX_V_I64: { int64_t x; memcpy(&x, p, 8); put_int(b, x); break; }
    case TBX_V_F16: { uint16_t x; memcpy(&x, p, 2); put_f16(b, x); break; }
    case TBX_V_BF16: { uint16_t x; memcpy(&x, p, 2); put_f32(b, tbx_bf16_to_f32(x)); break; }
    case TBX_V_F32: { float x; memcpy(&x, p, 4); put_f32(b, x); break; }
    case TBX_V_F64: { double x; memcpy(&x, p, 8); put_f64(b, x); break; }
    default: b->oom = true; break; /* not reached: packed arrays hold fixed-size scalars */
    }
}

typedef struct zt_keyref { const char *k; size_t n; size_t i; } zt_keyref;

static int keyref_cmp(const void *a, const void *b) {
    const zt_keyref *x = a, *y = b;
    return zt_key_cmp(x->k, x->n, y->k, y->n);
}

tbx_status zt_put_value(zt_buf *b, const tbx_value *v, tbx_error *err) {
    switch (v->type) {
    case TBX_V_NULL: zt_put_raw(b, "\xF6", 1); break;
    case TBX_V_BOOL: zt_put_raw(b, v->v.u ? "\xF5" : "\xF4", 1); break;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64:
        zt_put_head(b, 0, v->v.u);
        break;
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: put_int(b, v->v.i); break;
    case TBX_V_F16: put_f16(b, tbx_f32_to_f16((float)v->v.f)); break;
    case TBX_V_BF16: case TBX_V_F32: put_f32(b, (float)v->v.f); break;
    case TBX_V_F64: put_f64(b, v->v.f); break;
    case TBX_V_STRING: zt_put_text(b, v->v.s.p, v->v.s.n); break;
    case TBX_V_BYTES: zt_put_head(b, 2, v->v.s.n); zt_put_raw(b, v->v.s.p, v->v.s.n); break;
    case TBX_V_ARRAY:
        zt_put_head(b, 4, v->v.a.n);
        if (v->v.a.packed) {
            size_t es = tbx_value_scalar_size(v->elem);
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++)
                put_packed(b, v->elem, (const uint8_t *)v->v.a.packed + i * es);
        } else if (v->v.a.soff) {
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++) {
                size_t len;
                const char *sp = tbx_value_str_at(v, i, &len);
                zt_put_text(b, sp, len);
            }
        } else {
            for (size_t i = 0; i < v->v.a.n && !b->oom; i++) {
                tbx_status st = zt_put_value(b, v->v.a.items[i], err);
                if (st != TBX_OK) return st;
            }
        }
        break;
    case TBX_V_MAP: {
        size_t n = v->v.a.n;
        zt_keyref *ks = tbx_calloc(b->al, n ? n : 1, sizeof *ks);
        if (!ks) return tbx_err_nomem(err, "manifest");
        for (size_t i = 0; i < n; i++) {
            ks[i].k = v->v.a.keys[i];
            ks[i].n = v->v.a.key_lens[i];
            ks[i].i = i;
        }
        qsort(ks, n, sizeof *ks, keyref_cmp);
        zt_put_head(b, 5, n);
        tbx_status st = TBX_OK;
        for (size_t i = 0; i < n && st == TBX_OK && !b->oom; i++) {
            zt_put_text(b, ks[i].k, ks[i].n);
            st = zt_put_value(b, v->v.a.items[ks[i].i], err);
        }
        tbx_free(b->al, ks, (n ? n : 1) * sizeof *ks);
        if (st != TBX_OK) return st;
        break;
    }
    default:
        return tbx_err(err, TBX_E_LOSSY, TBX_NO_OFFSET, "metadata",
                       "zTensor attributes cannot store a %s value", tbx_value_type_name(v->type));
    }
    return b->oom ? tbx_err_nomem(err, "manifest") : TBX_OK;
}
