/*
 * split.c - the scalar kernel of split layouts (codes, scales and zero points in separate
 * regions); see split.h.
 */
#include "split.h"

#include <string.h>

static bool int_dtype_bytes(tbx_dtype dt, uint32_t *bytes, bool *is_signed) {
    switch (dt) {
    case TBX_DT_U8: *bytes = 1; *is_signed = false; return true;
    case TBX_DT_I8: *bytes = 1; *is_signed = true; return true;
    case TBX_DT_U16: *bytes = 2; *is_signed = false; return true;
    case TBX_DT_I16: *bytes = 2; *is_signed = true; return true;
    case TBX_DT_U32: *bytes = 4; *is_signed = false; return true;
    case TBX_DT_I32: *bytes = 4; *is_signed = true; return true;
    case TBX_DT_U64: *bytes = 8; *is_signed = false; return true;
    case TBX_DT_I64: *bytes = 8; *is_signed = true; return true;
    default: return false;
    }
}

static bool scope_ok(tbx_quant_scope s, bool zero) {
    return s == TBX_QSCOPE_TENSOR || s == TBX_QSCOPE_CHANNEL || s == TBX_QSCOPE_GROUP ||
           (zero && s == TBX_QSCOPE_NONE);
}

tbx_status tbx_split_geom_init(tbx_split_geom *g, const tbx_quant_info *q, const uint64_t *shape,
                               uint32_t ndim, uint32_t per_word) {
    memset(g, 0, sizeof *g);
    uint32_t wb = 0;
    bool word_signed = false;
    if (q->method != TBX_QUANT_LINEAR || !int_dtype_bytes(q->code_dtype, &wb, &word_signed) ||
        q->bits < 1 || q->bits > 64 || per_word < 1 || (uint64_t)per_word * q->bits > 8u * wb ||
        !scope_ok(q->scale.scope, false) || !scope_ok(q->zero.scope, true))
        return TBX_E_UNSUPPORTED;
    g->bits = q->bits;
    g->per_word = per_word;
    g->word_bytes = wb;
    g->code_signed = q->code_signed != 0;
    g->scale_scope = q->scale.scope;
    g->zero_scope = q->zero.scope;
    g->cols = ndim ? shape[ndim - 1] : 1;
    if (q->scale.scope == TBX_QSCOPE_GROUP || q->zero.scope == TBX_QSCOPE_GROUP) {
        if (q->block_size == 0) return TBX_E_UNSUPPORTED;
        g->group = q->block_size;
        g->groups_per_row = g->cols / g->group + (g->cols % g->group != 0);
    }
    if (q->scale.scope == TBX_QSCOPE_CHANNEL || q->zero.scope == TBX_QSCOPE_CHANNEL) {
        /* one channel axis for both (OINF allows distinct axes: not a split user yet) */
        uint32_t axis = q->scale.scope == TBX_QSCOPE_CHANNEL ? q->scale.axis : q->zero.axis;
        if ((q->scale.scope == TBX_QSCOPE_CHANNEL && q->zero.scope == TBX_QSCOPE_CHANNEL &&
             q->scale.axis != q->zero.axis) || axis >= ndim)
            return TBX_E_UNSUPPORTED;
        g->channels = shape[axis];
        g->inner = 1;
        for (uint32_t d = axis + 1; d < ndim; d++) g->inner *= shape[d]; /* <= nelems */
    }
    return TBX_OK;
}

uint64_t tbx_split_param_index(const tbx_split_geom *g, tbx_quant_scope s, uint64_t e) {
    switch (s) {
    case TBX_QSCOPE_GROUP:
        return g->cols ? (e / g->cols) * g->groups_per_row + (e % g->cols) / g->group : 0;
    case TBX_QSCOPE_CHANNEL:
        return g->channels && g->inner ? (e / g->inner) % g->channels : 0;
    default:
        return 0;
    }
}

/* Walks the parameter index of consecutive elements without divisions. */
typedef struct param_walk {
    tbx_quant_scope scope;
    uint64_t idx;           /* index into the caller's slice */
    uint64_t a, b;          /* GROUP: column, position in the group; CHANNEL: position in inner */
} param_walk;

static void walk_init(param_walk *w, const tbx_split_geom *g, tbx_quant_scope s, uint64_t e) {
    w->scope = s;
    w->idx = 0;
    w->a = w->b = 0;
    if (s == TBX_QSCOPE_GROUP && g->cols) {
        w->a = e % g->cols;
        w->b = w->a % g->group;
    } else if (s == TBX_QSCOPE_CHANNEL && g->inner && g->channels) {
        w->idx = (e / g->inner) % g->channels;
        w->b = e % g->inner;
    }
}

/* Elements left before the index changes (UINT64_MAX: never). */
static inline uint64_t walk_left(const param_walk *w, const tbx_split_geom *g) {
    if (w->scope == TBX_QSCOPE_GROUP) {
        uint64_t in_group = g->group - w->b, in_row = g->cols - w->a;
        return in_group < in_row ? in_group : in_row;
    }
    if (w->scope == TBX_QSCOPE_CHANNEL) return g->inner - w->b;
    return UINT64_MAX;
}

/* Moves the walk n elements on (n <= walk_left). */
static inline void walk_skip(param_walk *w, const tbx_split_geom *g, uint64_t n) {
    if (w->scope == TBX_QSCOPE_GROUP) {
        w->a += n;
        w->b += n;
        if (w->a == g->cols) { w->a = 0; w->b = 0; w->idx++; }
        else if (w->b == g->group) { w->b = 0; w->idx++; }
    } else if (w->scope == TBX_QSCOPE_CHANNEL) {
        w->b += n;
        if (w->b == g->inner) {
            w->b = 0;
            if (++w->idx == g->channels) w->idx = 0;
        }
    }
}

static inline uint64_t load_word(const uint8_t *p, uint32_t n) {
    uint64_t v = 0;
    for (uint32_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* The kernel works in runs of elements that share one scale and one zero point. */
void tbx_dequant_split_scalar(const tbx_split_geom *g, const uint8_t *codes, const float *scales,
                              const float *zeros, uint64_t first, uint64_t count, float *dst) {
    if (count == 0) return;
    const uint64_t per = g->per_word, bits = g->bits;
    const uint32_t wb = g->word_bytes;
    const uint64_t mask = bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    const uint64_t sign = (uint64_t)1 << (bits - 1);
    const bool has_zero = g->zero_scope != TBX_QSCOPE_NONE && zeros;
    const bool sext = g->code_signed && bits < 64;
    param_walk ws, wz;
    walk_init(&ws, g, g->scale_scope, first);
    walk_init(&wz, g, has_zero ? g->zero_scope : TBX_QSCOPE_TENSOR, first);
    uint64_t slot = first % per;
    const uint8_t *wp = codes;
    uint64_t word = load_word(wp, wb) >> (slot * bits);
    uint64_t i = 0;
    while (i < count) {
        uint64_t run = count - i, l = walk_left(&ws, g);
        if (l < run) run = l;
        l = walk_left(&wz, g);
        if (l < run) run = l;
        const float s = scales[ws.idx], z = has_zero ? zeros[wz.idx] : 0.0f;
        for (uint64_t k = 0; k < run; k++) {
            uint64_t c = word & mask;
            float code;
            if (sext && (c & sign)) code = (float)(int64_t)(c | ~mask);
            else if (bits < 64) code = (float)(int64_t)c;
            else code = (float)c;
            dst[i + k] = (code - z) * s;
            if (++slot == per) {
                slot = 0;
                if (i + k + 1 < count) {
                    wp += wb;
                    word = load_word(wp, wb);
                }
            } else {
                word = bits >= 64 ? 0 : word >> bits;
            }
        }
        i += run;
        if (i < count) {
            walk_skip(&ws, g, run);
            walk_skip(&wz, g, run);
        }
    }
}

tbx_status tbx_affine_geom_init(tbx_split_geom *g, const tbx_quant_param *p,
                                const uint64_t *shape, uint32_t ndim) {
    memset(g, 0, sizeof *g);
    if (p->scope != TBX_QSCOPE_TENSOR && p->scope != TBX_QSCOPE_CHANNEL &&
        p->scope != TBX_QSCOPE_NONE)
        return TBX_E_UNSUPPORTED;
    g->scale_scope = p->scope; /* the one parameter this geometry walks */
    g->zero_scope = TBX_QSCOPE_NONE;
    if (p->scope == TBX_QSCOPE_CHANNEL) {
        if (p->axis >= ndim) return TBX_E_UNSUPPORTED;
        g->channels = shape[p->axis];
        g->inner = 1;
        for (uint32_t d = p->axis + 1; d < ndim; d++) g->inner *= shape[d]; /* <= nelems */
    }
    return TBX_OK;
}

void tbx_dequant_affine_inplace(const tbx_split_geom *gs, const tbx_split_geom *gz,
                                const float *scales, const float *zeros, uint64_t first,
                                uint64_t count, float *x) {
    const bool has_zero = gz->scale_scope != TBX_QSCOPE_NONE && zeros;
    param_walk ws, wz;
    walk_init(&ws, gs, gs->scale_scope, first);
    walk_init(&wz, gz, has_zero ? gz->scale_scope : TBX_QSCOPE_TENSOR, first);
    uint64_t i = 0;
    while (i < count) {
        uint64_t run = count - i, l = walk_left(&ws, gs);
        if (l < run) run = l;
        l = walk_left(&wz, gz);
        if (l < run) run = l;
        const float s = scales[ws.idx], z = has_zero ? zeros[wz.idx] : 0.0f;
        for (uint64_t k = 0; k < run; k++) x[i + k] = (x[i + k] - z) * s;
        i += run;
        if (i < count) {
            walk_skip(&ws, gs, run);
            walk_skip(&wz, gz, run);
        }
    }
}

tbx_dequant_split_fn tbx_dequant_split_for(const tbx_split_geom *g) {
    (void)g;
    return tbx_dequant_split_scalar;
}
