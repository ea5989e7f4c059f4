/*
 * convert_mcfq.c - the conversion step that quantizes a dense 2-D float tensor to one of MCF's
 * quantized families (q8 q4 k6 k4 k3 k2: src/quant/mcfq.h; int8 int4: the seed's raw layout)
 * and streams the payload out. Façade layer (next to convert.c, which calls it).
 *
 * Two passes over the input, both in chunks of whole rows read on the calling thread (file
 * handles are not shared between threads) through tbx_tensor_read_f32:
 *   1. the clip range: unless the caller gives one, [-m, m] with m the largest |value| among the
 *      finite values (mantle's default; the range is recorded in MCF's QuantInfo);
 *   2. quantization: worker threads (the pool of src/core/pool.c, tbx_threads_default()) each
 *      quantize a chunk of rows into its place in the payload and decode it again to sum the
 *      squared error. A row's bytes depend on that row only and the chunks are fixed by the
 *      shape, so the payload and the error sum do not depend on the thread count.
 * The payload is built whole in memory (its regions are stored scales first, codes last, and
 * the writer takes a tensor's bytes in order): at most a quarter of the f32 tensor plus 1/16
 * for the scales, checked against limits.max_tensor_bytes before allocating. Then it goes to
 * the sink in 4 MiB pieces.
 */
#include "convert_mcfq.h"

#include <inttypes.h>
#include <math.h>

#define MQ_CHUNK_VALUES ((uint64_t)1 << 18) /* values per job (1 MiB of f32), whole rows */
#define MQ_SLOTS_MAX (TBX_THREADS_DEFAULT_MAX + 2)
#define MQ_WRITE_PIECE ((size_t)4 << 20)

typedef struct mq_ctx mq_ctx;

typedef struct mq_slot {
    tbx_task task; /* first member: the pool sees only this */
    mq_ctx *ctx;
    float *x, *y;  /* input values, decoded values (cap values each) */
    uint64_t r0, nrows;
    double sse;
    tbx_value_check chk; /* what the (clipped) values became */
} mq_slot;

struct mq_ctx {
    const tbx_mcfq_request *rq;
    uint64_t rows, cols;
    tbx_mcfq_layout L;   /* q / k */
    tbx_mcfi_layout I;   /* int8 / int4 */
    float iscale, izero; /* int8 / int4 parameters */
    float range;         /* tbx_quant_range of the family (INFINITY for int8 / int4) */
    uint8_t *payload;
};

static void mq_run(tbx_task *task) {
    mq_slot *s = (mq_slot *)task;
    const mq_ctx *c = s->ctx;
    const uint64_t n = s->nrows * c->cols, e0 = s->r0 * c->cols;
    if (c->rq->kind < TBX_MCFQ_KIND_COUNT) {
        const tbx_mcfq_layout *L = &c->L;
        uint8_t *sc = c->payload + L->scales_off + 2 * s->r0 * (L->super ? L->spr : L->bpr);
        uint8_t *su = L->super ? c->payload + L->sub_off + s->r0 * L->bpr : NULL;
        uint8_t *co = c->payload + L->codes_off + s->r0 * L->row_code_bytes;
        tbx_mcfq_quantize_rows(L, c->rq->method, s->x, s->nrows, c->rq->clip_lo, c->rq->clip_hi,
                               sc, su, co);
        tbx_mcfq_dequant_rows(L, sc, su, co, s->nrows, s->y);
    } else {
        uint8_t *co = c->payload + c->I.codes_off;
        tbx_mcfi_quantize(&c->I, c->iscale, c->izero, c->rq->clip_lo, c->rq->clip_hi, s->x, e0, n,
                          co);
        tbx_mcfi_dequant(&c->I, c->iscale, c->izero, co, e0, n, s->y);
    }
    double e = 0;
    uint64_t nonfinite = 0, beyond = 0;
    float m = 0;
    const float lo = c->rq->clip_lo, hi = c->rq->clip_hi;
    for (uint64_t k = 0; k < n; k++) {
        if (!isfinite(s->x[k])) continue; /* non-finite inputs have no error to speak of */
        /* the value asked for: clipped to the range (a clipped value is no overflow) */
        const float a = fabsf(s->x[k] < lo ? lo : s->x[k] > hi ? hi : s->x[k]);
        if (a > m) m = a;
        if (a > c->range) beyond++;
        if (!isfinite(s->y[k])) { e = INFINITY; nonfinite++; continue; } /* non-finite decoded */
        const double d = (double)s->y[k] - (double)s->x[k];
        e += d * d;
    }
    s->sse = e;
    s->chk.nonfinite = nonfinite;
    s->chk.beyond = beyond;
    s->chk.max_abs = m;
}

tbx_status tbx_mcfq_scan_clip(tbx_file *in, size_t i, float *lo, float *hi, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    const uint64_t n = t->nelems, per = MQ_CHUNK_VALUES;
    float *x = n ? tbx_malloc(&in->al, (size_t)per * sizeof(float)) : NULL;
    if (n && !x) return tbx_err_nomem(err, "quantization buffer");
    tbx_status st = TBX_OK;
    float m = 0;
    for (uint64_t e = 0; st == TBX_OK && e < n; e += per) {
        const uint64_t k = n - e < per ? n - e : per;
        st = tbx_tensor_read_f32(in, i, e, k, x, err);
        for (uint64_t j = 0; st == TBX_OK && j < k; j++) {
            const float a = fabsf(x[j]);
            if (isfinite(a) && a > m) m = a;
        }
    }
    tbx_free(&in->al, x, x ? (size_t)per * sizeof(float) : 0);
    *lo = -m;
    *hi = m;
    return st;
}

tbx_status tbx_mcfq_convert_tensor(tbx_file *in, size_t i, tbx_mcfq_request *rq,
                                   tbx_status (*sink)(void *ud, const void *data, size_t len,
                                                      tbx_error *err),
                                   void *ud, tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    if (t->ndim != 2 || rq->kind > TBX_MCFQ_INT4)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, t->name,
                       "tensor \"%s\": MCF quantization needs a 2-D tensor", t->name);
    mq_ctx c;
    memset(&c, 0, sizeof c);
    c.rq = rq;
    c.rows = t->shape[0];
    c.cols = t->shape[1];
    rq->nvalues = c.rows * c.cols; /* checked when the tensor was added */
    rq->sse = 0;
    memset(&rq->chk, 0, sizeof rq->chk);
    c.range = rq->kind < TBX_MCFQ_KIND_COUNT
                  ? tbx_quant_range((tbx_dtype)(TBX_DT_MCF_Q8 + rq->kind))
                  : INFINITY;
    tbx_status st;
    uint64_t total;
    if (rq->kind < TBX_MCFQ_KIND_COUNT) {
        st = tbx_mcfq_layout_get((tbx_mcfq_kind)rq->kind, c.rows, c.cols, &c.L);
        total = c.L.total;
    } else {
        st = tbx_mcfi_layout_get(rq->kind == TBX_MCFQ_INT8 ? 8 : 4, false, rq->nvalues, &c.I);
        total = c.I.total;
    }
    if (st != TBX_OK)
        return tbx_err(err, st, TBX_NO_OFFSET, t->name, "tensor \"%s\": quantized size overflows",
                       t->name);
    if (total > in->limits.max_tensor_bytes || total > SIZE_MAX)
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, t->name,
                       "tensor \"%s\": quantized payload of %" PRIu64 " bytes exceeds the "
                       "max_tensor_bytes limit", t->name, total);
    /* chunk: whole rows, an even number of values (int4 codes share bytes) */
    uint64_t rows_per = c.cols >= MQ_CHUNK_VALUES ? 1 : MQ_CHUNK_VALUES / (c.cols ? c.cols : 1);
    if ((c.cols & 1) && (rows_per & 1)) rows_per++;
    if (rows_per == 0) rows_per = 1;
    const uint64_t cap = rows_per * c.cols;
    if (cap > SIZE_MAX / sizeof(float))
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, t->name, "tensor \"%s\": rows too long", t->name);

    tbx_pool *pool = NULL;
    mq_slot slot[MQ_SLOTS_MAX];
    int nslots = 1;
    memset(slot, 0, sizeof slot);
    c.payload = total ? tbx_calloc(&in->al, (size_t)total, 1) : NULL;
    if (total && !c.payload) return tbx_err_nomem(err, "quantized payload");

    /* pass 1: the clip range */
    if (!rq->has_clip) st = tbx_mcfq_scan_clip(in, i, &rq->clip_lo, &rq->clip_hi, err);
    if (st == TBX_OK && rq->kind >= TBX_MCFQ_INT8) {
        tbx_mcfi_params(&c.I, rq->clip_lo, rq->clip_hi, &c.iscale, &c.izero);
        uint32_t u;
        memcpy(&u, &c.iscale, 4);
        tbx_st32(c.payload + c.I.scale_off, u);
    }

    /* pass 2: quantize on the workers, in order */
    if (st == TBX_OK) {
        pool = tbx_pool_start(&in->al, tbx_threads_default());
        const int nth = tbx_pool_threads(pool);
        nslots = nth > 0 ? nth + 2 : 1;
        for (int k = 0; k < nslots && st == TBX_OK; k++) {
            slot[k].ctx = &c;
            slot[k].task.run = mq_run;
            if (!slot[k].x) slot[k].x = tbx_malloc(&in->al, (size_t)cap * sizeof(float));
            slot[k].y = tbx_malloc(&in->al, (size_t)cap * sizeof(float));
            if (cap && (!slot[k].x || !slot[k].y)) st = tbx_err_nomem(err, "quantization buffer");
        }
    }
    const uint64_t nchunks = c.rows ? (c.rows + rows_per - 1) / rows_per : 0;
    uint64_t next_read = 0, next_done = 0;
    while (st == TBX_OK && next_done < nchunks) {
        if (next_read < nchunks && next_read - next_done < (uint64_t)nslots) {
            mq_slot *s = &slot[next_read % (uint64_t)nslots];
            s->r0 = next_read * rows_per;
            s->nrows = c.rows - s->r0 < rows_per ? c.rows - s->r0 : rows_per;
            st = tbx_tensor_read_f32(in, i, s->r0 * c.cols, s->nrows * c.cols, s->x, err);
            if (st != TBX_OK) break;
            tbx_pool_submit(pool, &s->task);
            next_read++;
            if (!tbx_pool_wait(pool, &slot[next_done % (uint64_t)nslots].task, false)) continue;
        }
        mq_slot *s = &slot[next_done % (uint64_t)nslots];
        tbx_pool_wait(pool, &s->task, true);
        rq->sse += s->sse; /* in chunk order: the same sum whatever the thread count */
        rq->chk.nonfinite += s->chk.nonfinite;
        rq->chk.beyond += s->chk.beyond;
        if (s->chk.max_abs > rq->chk.max_abs) rq->chk.max_abs = s->chk.max_abs;
        next_done++;
    }
    tbx_pool_drain(pool);
    tbx_pool_stop(pool);
    for (int k = 0; k < MQ_SLOTS_MAX; k++) {
        tbx_free(&in->al, slot[k].x, slot[k].x ? (size_t)cap * sizeof(float) : 0);
        tbx_free(&in->al, slot[k].y, slot[k].y ? (size_t)cap * sizeof(float) : 0);
    }
    for (uint64_t p = 0; st == TBX_OK && p < total; p += MQ_WRITE_PIECE) {
        const size_t n = (size_t)(total - p < MQ_WRITE_PIECE ? total - p : MQ_WRITE_PIECE);
        st = sink(ud, c.payload + p, n, err);
    }
    tbx_free(&in->al, c.payload, c.payload ? (size_t)total : 0);
    return st;
}
