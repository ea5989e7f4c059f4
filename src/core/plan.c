/*
 * plan.c - building and freeing a conversion plan (plan.h): tables of tensors and sources,
 * and blocks of memory the plan owns (names, shapes, descriptions that must outlive the
 * writer that borrows them).
 */
#include "plan.h"

/* a plain conversion holds one of these per tensor: keep it small */
_Static_assert(sizeof(void *) != 8 || sizeof(tbx_plan_tensor) == 48,
               "tbx_plan_tensor is 48 bytes on 64-bit targets");

struct tbx_plan_block {
    struct tbx_plan_block *next;
    size_t size; /* bytes of the block, this header included */
};

void tbx_plan_init(tbx_plan *p, const tbx_alloc *al) {
    memset(p, 0, sizeof *p);
    p->al = *al;
}

void tbx_plan_free(tbx_plan *p) {
    if (!p) return;
    tbx_free(&p->al, p->t, p->cap * sizeof *p->t);
    tbx_free(&p->al, p->srcs, p->cap_srcs * sizeof *p->srcs);
    for (struct tbx_plan_block *b = p->blocks, *nx; b; b = nx) {
        nx = b->next;
        tbx_free(&p->al, b, b->size);
    }
    const tbx_alloc al = p->al;
    memset(p, 0, sizeof *p);
    p->al = al;
}

static bool resize(const tbx_alloc *al, void **items, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return true;
    size_t bytes;
    if (__builtin_mul_overflow(n, elem, &bytes)) return false;
    void *q = *items ? tbx_realloc(al, *items, *cap * elem, bytes) : tbx_malloc(al, bytes);
    if (!q) return false;
    *items = q;
    *cap = n;
    return true;
}

tbx_status tbx_plan_reserve(tbx_plan *p, size_t n, size_t nsrcs, tbx_error *err) {
    if (!resize(&p->al, (void **)&p->t, &p->cap, n, sizeof *p->t) ||
        !resize(&p->al, (void **)&p->srcs, &p->cap_srcs, nsrcs, sizeof *p->srcs))
        return tbx_err_nomem(err, "conversion plan");
    return TBX_OK;
}

tbx_status tbx_plan_add(tbx_plan *p, const tbx_plan_tensor *t, size_t *k, tbx_error *err) {
    if (!tbx_grow(&p->al, (void **)&p->t, &p->cap, p->n + 1, sizeof *p->t))
        return tbx_err_nomem(err, "conversion plan");
    p->t[p->n] = *t;
    if (!(t->flags & TBX_PT_WHOLE)) {
        p->t[p->n].src = p->nsrcs;
        p->t[p->n].nsrc = 0;
    }
    if (k) *k = p->n;
    p->n++;
    return TBX_OK;
}

tbx_status tbx_plan_add_src(tbx_plan *p, const tbx_plan_src *s, tbx_error *err) {
    if (p->n == 0 || (p->t[p->n - 1].flags & (TBX_PT_WHOLE | TBX_PT_GEN)))
        return tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "plan",
                       "a source added to no tensor, a whole one or a generated one");
    if (!tbx_grow(&p->al, (void **)&p->srcs, &p->cap_srcs, p->nsrcs + 1, sizeof *p->srcs))
        return tbx_err_nomem(err, "conversion plan");
    p->srcs[p->nsrcs++] = *s;
    p->t[p->n - 1].nsrc++;
    return TBX_OK;
}

void *tbx_plan_alloc(tbx_plan *p, size_t n) {
    const size_t head = (sizeof(struct tbx_plan_block) + 15) & ~(size_t)15;
    size_t size;
    if (__builtin_add_overflow(n, head, &size)) return NULL;
    struct tbx_plan_block *b = tbx_calloc(&p->al, 1, size);
    if (!b) return NULL;
    b->size = size;
    b->next = p->blocks;
    p->blocks = b;
    return (uint8_t *)b + head;
}

const char *tbx_plan_name(const tbx_plan *p, const tbx_file *in, size_t k, size_t *len) {
    const tbx_plan_tensor *t = &p->t[k];
    if (t->name) {
        if (len) *len = t->name_len;
        return t->name;
    }
    const tbx_tensor *it = &in->tensors[t->src];
    if (len) *len = it->name_len;
    return it->name;
}

const uint64_t *tbx_plan_shape(const tbx_plan *p, const tbx_file *in, size_t k, uint32_t *ndim) {
    const tbx_plan_tensor *t = &p->t[k];
    if (t->shape || !(t->flags & TBX_PT_WHOLE)) {
        *ndim = t->ndim;
        return t->shape;
    }
    *ndim = in->tensors[t->src].ndim;
    return in->tensors[t->src].shape;
}

const tbx_plan_src *tbx_plan_src_at(const tbx_plan *p, const tbx_file *in, size_t k, uint32_t j,
                                    tbx_plan_src *tmp) {
    const tbx_plan_tensor *t = &p->t[k];
    if (!(t->flags & TBX_PT_WHOLE)) return &p->srcs[t->src + j];
    const tbx_tensor *it = &in->tensors[t->src];
    memset(tmp, 0, sizeof *tmp);
    tmp->tensor = t->src;
    tmp->rows = 1;
    tmp->cols = it->nelems;
    tmp->xform = TBX_XF_NONE;
    return tmp;
}
