/*
 * engine.c - carries out a conversion plan (plan.h) into an open writer: the one place where
 * tensor values are read, decoded, transformed, encoded and written, whatever the conversion
 * (plain copies and casts, quantization to ggml block types and MCF families, dequantization,
 * requantization, a Hugging Face model to llama.cpp's layout).
 *
 * Declaring. Every output tensor is declared first, in plan order (the writer lays the file
 * out at the first byte): its name, dtype and shape, and its quantization description: a kept
 * one as the input has it; for an encoder that describes its output (MCF families), the one
 * the encoder makes from the clip range, which is first found by a pass over the values
 * (+-max |finite value|) when the plan gives none.
 *
 * Writing, tensor by tensor, in plan order:
 *   - bytes that pass unchanged (TBX_PENC_STORED, no transform): per source, copied by the
 *     kernel (tbx_writer_copy_fd_: copy_file_range) when both files allow it, else read in
 *     4 MiB ranges, or component by component (a quantized_group kept), or read whole for a
 *     driver that decodes only whole components (big-endian GGUF);
 *   - MXFP4 blocks and scales of a Hugging Face checkpoint (TBX_XF_MXFP4_HF): read in runs of
 *     rows on the calling thread and written as ggml's MXFP4 blocks (pack_mxfp4);
 *   - anything else as a sequence of jobs, each a run of about 2^19 values (4 MiB of stored
 *     bytes when they are only reordered) of one source, cut so that every job holds whole
 *     units of the encoder (ggml blocks; whole rows for MCF payloads) and of the transform
 *     (whole heads of a permutation when they fit; output rows of a transpose). The calling
 *     thread reads each job's input (file handles are not shared between threads): stored
 *     bytes of a raw float tensor (or a pointer into the mapping, checked after the worker
 *     read it), or values decoded by tbx_tensor_read_f32 for anything else, or a generator's
 *     values; a worker then decodes, reorders (q/k heads, 64 x 64 tiles of a transpose),
 *     scales or adds, encodes through the encoder of the output dtype (src/quant/encode.h)
 *     and counts what the values became (src/quant/check.h: beyond the type's range,
 *     finite values that came out Inf/NaN; the squared error of MCF payloads); the calling
 *     thread writes the jobs' bytes in order. A ring of threads + 2 jobs overlaps reading
 *     with the work. Every encoder works on its unit alone and the cut depends on the shape
 *     only, so the bytes (and the error sums, added in job order) do not depend on the thread
 *     count. MCF payloads (scales, then codes) are built whole in memory and written once
 *     complete.
 * Memory: threads + 2 jobs' buffers (at most ~12 MiB each, f64 both ways), a 4 MiB copy
 * buffer, and an MCF payload when one is being made.
 */
#include "convert.h"
#include "encode.h"
#include "ggml.h"
#include "check.h"
#include "plain.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define CHUNK_VALUES ((uint64_t)1 << 19)  /* values of a job (2 MiB of f32) */
#define RAW_CHUNK ((uint64_t)4 << 20)     /* stored bytes of a job that only reorders them */
#define COPY_BUF ((size_t)4 << 20)        /* the copy path's buffer */
#define COPY_PIECE ((uint64_t)64 << 20)   /* kernel copies between progress calls */
#define SCAN_VALUES ((uint64_t)1 << 18)   /* values per read of the clip scan */
#define PAYLOAD_PIECE ((size_t)4 << 20)   /* an MCF payload goes to the writer in such pieces */
#define SLOTS_MAX (TBX_THREADS_DEFAULT_MAX + 2)
#define TILE 64
#define TBAND_BLOCK_MAX ((uint64_t)1 << 21) /* values of a transpose's band of one block */

/* How a job's input is read (on the calling thread) */
enum { IN_F32, IN_RAW, IN_MAP, IN_GEN };
/* The job's shape (what the calling thread reads and the worker reorders) */
enum {
    J_SPAN,    /* values [a, a + n) of the source's view, in order */
    J_PBLOCK,  /* view rows [a, a + nr), whole heads, read at once and permuted by the worker */
    J_PROWS,   /* output rows [a, a + nr) of a permutation, gathered row by row */
    J_PPIECE,  /* values [x, x + n) of output row a of a permutation */
    J_TBAND,   /* output rows [a, a + nr) of a transpose: nr values of every view row, tiled */
    J_TPIECE   /* values [x, x + n) of output row a of a transpose (view rows x..), one by one */
};

typedef struct eng eng;

/* What a job needs to know of its source (copied into the slot: jobs of several sources may
 * be in flight). */
typedef struct esrc {
    tbx_plan_src s;          /* the source (a whole tensor's made up) */
    uint64_t count;          /* rows * cols */
    uint64_t H, W;           /* its output view: [rows, cols], transposed: [cols, rows] */
    uint64_t out0;           /* its first value in the output tensor */
    uint8_t in;              /* IN_* */
    uint8_t kind;            /* J_* of its jobs (J_PBLOCK / J_PROWS chosen per job) */
    tbx_dtype dt;            /* the input tensor's dtype */
    const tbx_dtype_info *di;/* ... in the core table (IN_RAW, IN_MAP, stored reorders) */
    uint64_t esz;            /* stored bytes of a value (IN_RAW, IN_MAP, stored reorders) */
    const uint8_t *map;      /* IN_MAP: the tensor's bytes in the mapping */
    uint64_t per;            /* J_SPAN: values of a job; rows of a job (J_PBLOCK / J_PROWS /
                              * J_TBAND); values of a piece (J_PPIECE / J_TPIECE) */
} esrc;

typedef struct eslot {
    tbx_task task;           /* first member: the pool sees only this */
    eng *e;
    esrc src;                /* the job's source */
    uint8_t kind;            /* J_* */
    uint64_t a, x, nr, n;    /* the job (see J_*): n values in all */
    uint64_t out0;           /* its first value in the output tensor */
    const uint8_t *in;       /* IN_RAW / IN_MAP: stored bytes (runs of `run` values, `stride`
                              * values apart; J_TBAND from the mapping: one run per view row) */
    uint64_t nruns, run, stride;
    uint8_t gm, gn;          /* member gm of an interleaved group of gn jobs (gn 0 or 1: none) */
    bool direct;             /* f32 stored bytes read straight into f: nothing to decode */
    uint8_t *raw; size_t raw_cap;
    float *f, *g; size_t f_cap, g_cap;
    uint8_t *out; size_t out_cap;
    /* results */
    tbx_status st;
    const uint8_t *res;      /* bytes to write (NULL: none, an MCF payload's rows) */
    size_t res_len;
    tbx_value_check chk;
    double sse;
    double sse_ref;          /* TBX_PT_SEARCH: ggml's reference on the same values */
} eslot;

struct eng {
    tbx_file *in;
    tbx_plan *p;
    tbx_writer *w;
    const tbx_engine_opts *o;
    tbx_error *err;
    int threads;
    uint64_t chunk;          /* values of a job (o->chunk, else CHUNK_VALUES) */
    tbx_pool *pool;
    bool pool_tried;
    int nslots;
    eslot slot[SLOTS_MAX];
    uint8_t *cbuf;           /* the copy path's buffer (COPY_BUF) */
    uint8_t *ibuf;           /* an interleaved group's values (finish_group) */
    size_t ibuf_cap;
    float *scan;             /* the clip scan's buffer (SCAN_VALUES) */
    uint64_t done, total;    /* progress: input bytes */
    uint64_t cur_in;         /* progress: the input bytes of the tensor being written */
    uint64_t last_said;      /* progress: the last `done` reported (never goes back) */
    bool said;               /* progress: the callback was called */
    /* the tensor being written */
    size_t k;
    uint64_t wi;
    const char *name;
    uint8_t penc;            /* TBX_PENC_* */
    const tbx_encoder *enc;  /* TBX_PENC_ENCODE */
    tbx_dtype to;
    const tbx_dtype_info *toi; /* the output dtype in the core table (FLOAT / BLOCK) */
    bool check;              /* count what the values became */
    uint64_t out_cols;       /* its row length (the last dimension; 1-D: all) */
    bool search;             /* TBX_PT_SEARCH: the encoder's search, errors measured */
    /* An importance matrix's vector for the tensor (plan->qw), NULL: none. Jobs then hold
     * whole rows, handed to the row quantizer with the vector of their expert (`rpe` rows
     * each). */
    const float *qw;
    uint64_t rpe;
    double sse_ref;          /* ... ggml's reference's squared error, summed over the jobs */
    tbx_enc_payload pay;
    uint8_t *payload;
};

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */
/* ------------------------------------------------------------------------------------------ */
static const char *dt_name(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    return di ? di->name : "?";
}

static bool plain_float(tbx_dtype dt) {
    return dt == TBX_DT_F32 || dt == TBX_DT_F16 || dt == TBX_DT_BF16 || dt == TBX_DT_F64;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
}
/* The least common multiple of two units (at most a few hundred values each). */
static uint64_t lcm64(uint64_t a, uint64_t b) {
    if (a <= 1) return b ? b : 1;
    if (b <= 1) return a;
    return a / gcd64(a, b) * b;
}

/* Output row r of a head permutation comes from view row perm_row(r): llama's order
 * (TBX_XF_PERMUTE_HEADS) or its inverse (TBX_XF_UNPERMUTE_HEADS). */
static uint64_t perm_row(const tbx_plan_src *s, uint64_t r) {
    const uint64_t d = s->rows / s->heads, half = d / 2;
    const uint64_t head = r / d, w = r % d;
    if (s->xform == TBX_XF_UNPERMUTE_HEADS) return head * d + 2 * (w % half) + w / half;
    return head * d + (w % 2) * half + w / 2;
}

/* The distance between consecutive values of source s in its input (tbx_plan_src.step). */
static uint64_t src_step(const tbx_plan_src *s) { return s->step > 1 ? s->step : 1; }

/* Values [0, n) of a run read `step` apart (value i at buf + i x step x esz) packed to
 * consecutive ones, in place. */
static void pack_strided(uint8_t *buf, uint64_t n, uint64_t step, size_t esz) {
    for (uint64_t i = 1; step > 1 && i < n; i++) memmove(buf + i * esz, buf + i * step * esz, esz);
}

/* (Re)sizes a slot buffer to at least `need` bytes (the old contents are not kept). */
static bool ensure(const tbx_alloc *al, void **buf, size_t *cap, size_t need) {
    if (need <= *cap && *buf) return true;
    tbx_free(al, *buf, *cap);
    *buf = NULL;
    *cap = 0;
    *buf = tbx_malloc(al, need ? need : 1);
    if (!*buf) return false;
    *cap = need ? need : 1;
    return true;
}

/* The stored bytes of `count` values of dtype di (a block type: whole blocks). */
static bool bytes_of(const tbx_dtype_info *di, uint64_t count, uint64_t *out) {
    return di && tbx_dtype_info_nbytes(di, count, out) == TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Checking a plan against the input                                                           */
/* ------------------------------------------------------------------------------------------ */
static tbx_status bad_plan(tbx_error *err, const char *name, const char *what) {
    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "plan", "conversion plan, tensor "
                   "\"%s\": %s", name, what);
}

/* A TBX_XF_MXFP4_HF source of tensor t: uint8 blocks of 16 bytes and their uint8 scales, one
 * dense component each, the view's blocks within both; *blocks gets the view's block count. */
static tbx_status check_mxfp4_src(const tbx_file *in, const tbx_plan_tensor *t,
                                  const tbx_plan_src *s, uint64_t *blocks, tbx_error *err,
                                  const char *name) {
    if (t->enc != TBX_PENC_STORED || t->dtype != TBX_DT_MXFP4)
        return bad_plan(err, name, "MXFP4 blocks are repacked as stored MXFP4");
    if (s->aux >= in->ntensors) return bad_plan(err, name, "its MXFP4 scales are no tensor");
    const tbx_tensor *b = &in->tensors[s->tensor], *sc = &in->tensors[s->aux];
    if (b->dtype != TBX_DT_U8 || sc->dtype != TBX_DT_U8 || b->nelems % 16)
        return bad_plan(err, name, "MXFP4 blocks and scales are uint8, 16 bytes a block");
    if (b->ncomp != 1 || b->layout != TBX_LAYOUT_DENSE || sc->ncomp != 1 ||
        sc->layout != TBX_LAYOUT_DENSE || b->unreadable || sc->unreadable)
        return bad_plan(err, name, "MXFP4 blocks and scales must be dense readable tensors");
    uint64_t count, last, end;
    const uint64_t step = src_step(s);
    if (!tbx_mul_u64(s->rows, s->cols, &count) ||
        (count && (!tbx_mul_u64(s->rows - 1, step, &last) || !tbx_add_u64(last, 1, &last) ||
                   !tbx_mul_u64(last, s->cols, &last) || !tbx_add_u64(s->first, last, &end) ||
                   end > b->nelems / 16 || end > sc->nelems)) ||
        count > UINT64_MAX / 32)
        return bad_plan(err, name, "a source lies beyond its MXFP4 blocks or scales");
    *blocks = count;
    return TBX_OK;
}

static tbx_status check_plan(const tbx_file *in, const tbx_plan *p, tbx_error *err) {
    for (size_t k = 0; k < p->n; k++) {
        const tbx_plan_tensor *t = &p->t[k];
        const char *name = t->name ? t->name
                           : (t->flags & TBX_PT_WHOLE) && t->src < in->ntensors
                               ? in->tensors[t->src].name : "?";
        if ((t->flags & TBX_PT_WHOLE) && (t->src >= in->ntensors || (t->flags & TBX_PT_GEN)))
            return bad_plan(err, name, "no such input tensor");
        if (!(t->flags & TBX_PT_WHOLE) && (!t->name || (t->ndim && !t->shape)))
            return bad_plan(err, name, "a tensor made of sources needs its name and shape");
        if (t->enc == TBX_PENC_REFUSE) continue;
        if (t->enc != TBX_PENC_STORED && t->enc != TBX_PENC_ENCODE)
            return bad_plan(err, name, "unknown encoding");
        const tbx_encoder *enc = t->enc == TBX_PENC_ENCODE ? tbx_encoder_for(t->dtype) : NULL;
        if (t->enc == TBX_PENC_ENCODE && !enc)
            return bad_plan(err, name, "no encoder writes its dtype");
        uint32_t ndim;
        const uint64_t *shape = tbx_plan_shape(p, in, k, &ndim);
        uint64_t nelems = 1;
        for (uint32_t d = 0; d < ndim; d++)
            if (!tbx_mul_u64(nelems, shape[d], &nelems))
                return bad_plan(err, name, "its element count overflows");
        const uint64_t cols = ndim ? shape[ndim - 1] : 1;
        const tbx_dtype_info *oi = tbx_dtype_core_get((tbx_dtype)t->dtype);
        const uint64_t ounit = enc && enc->kind == TBX_ENC_BLOCK && oi ? oi->block_size : 1;
        if (enc && enc->kind == TBX_ENC_PAYLOAD && ndim != 2)
            return bad_plan(err, name, "an MCF family's payload is a 2-D tensor");
        if ((t->flags & TBX_PT_SEARCH) && !(enc && enc->search))
            return bad_plan(err, name, "a search goes with an encoder that has one");
        const bool qw = p->qw && p->qw[k];
        if (qw && (!enc || enc->kind != TBX_ENC_BLOCK || !tbx_ggml_quant_rows_for(enc->dtype) ||
                   (t->flags & (TBX_PT_SEARCH | TBX_PT_GEN)) || ndim < 2))
            return bad_plan(err, name, "an importance matrix goes with a ggml block type's rows");
        if (t->flags & TBX_PT_GEN) {
            if (t->nsrc || !p->generate || t->enc != TBX_PENC_ENCODE)
                return bad_plan(err, name, "a generated tensor has no sources, a generator and "
                                "an encoder");
            continue;
        }
        if ((t->flags & TBX_PT_CLIP_SCAN) ? !(enc && enc->clip)
                                          : enc && enc->clip && !(t->quant && t->quant->has_clip))
            return bad_plan(err, name, "a clip range goes with an encoder that takes one");
        uint64_t sum = 0;
        uint32_t gleft = 0; /* members of an interleaved group still to come */
        tbx_plan_src lead;
        memset(&lead, 0, sizeof lead);
        uint32_t nmx = 0;
        for (uint32_t j = 0, ns = tbx_plan_nsrc(p, k); j < ns; j++) {
            tbx_plan_src tmp;
            nmx += tbx_plan_src_at(p, in, k, j, &tmp)->xform == TBX_XF_MXFP4_HF;
        }
        if (nmx && nmx != tbx_plan_nsrc(p, k))
            return bad_plan(err, name, "MXFP4 blocks are not mixed with other sources");
        for (uint32_t j = 0, ns = tbx_plan_nsrc(p, k); j < ns; j++) {
            tbx_plan_src tmp;
            const tbx_plan_src *s = tbx_plan_src_at(p, in, k, j, &tmp);
            if (s->tensor >= in->ntensors) return bad_plan(err, name, "a source is no tensor");
            if (gleft == 0 && s->dstep > 1) { /* the first of an interleaved group */
                if (s->dstep > TBX_PLAN_DSTEP_MAX || s->dstep > ns - j)
                    return bad_plan(err, name, "an interleaved group has more sources than the "
                                    "tensor or than TBX_PLAN_DSTEP_MAX");
                if (!oi || oi->block_size > 1 || !oi->bits || oi->bits % 8 ||
                    (enc && enc->kind == TBX_ENC_PAYLOAD) || qw || nmx)
                    return bad_plan(err, name, "interleaved sources go to a dtype stored value "
                                    "by value in whole bytes");
                lead = *s;
                gleft = s->dstep;
            }
            if (gleft) {
                if (s->dstep != lead.dstep || s->rows != lead.rows || s->cols != lead.cols ||
                    s->xform != lead.xform || s->heads != lead.heads)
                    return bad_plan(err, name, "the sources of an interleaved group differ in "
                                    "their view or transform");
                gleft--;
            } else if (s->dstep > 1) {
                return bad_plan(err, name, "an interleaved group is cut short");
            }
            const tbx_tensor *it = &in->tensors[s->tensor];
            if (s->xform == TBX_XF_MXFP4_HF) {
                uint64_t blocks = 0;
                tbx_status ms = check_mxfp4_src(in, t, s, &blocks, err, name);
                if (ms != TBX_OK) return ms;
                if (!tbx_add_u64(sum, blocks * 32, &sum))
                    return bad_plan(err, name, "its element count overflows");
                continue;
            }
            uint64_t count, end, span = 0;
            const bool strided = s->step > 1;
            if (!tbx_mul_u64(s->rows, s->cols, &count) ||
                (count && !tbx_mul_u64(count - 1, src_step(s), &span)) ||
                !tbx_add_u64(s->first, count ? span + 1 : 0, &end) ||
                end > it->nelems || !tbx_add_u64(sum, count, &sum))
                return bad_plan(err, name, "a source lies beyond its input tensor");
            if (it->unreadable) return bad_plan(err, name, "a source cannot be read");
            const bool heads = s->xform == TBX_XF_PERMUTE_HEADS ||
                               s->xform == TBX_XF_UNPERMUTE_HEADS;
            const bool reorder = heads || s->xform == TBX_XF_TRANSPOSE || strided ||
                                 s->dstep > 1;
            if (s->xform > TBX_XF_ZERO) return bad_plan(err, name, "unknown transform");
            if (heads &&
                (s->heads == 0 || s->rows % ((uint64_t)2 * s->heads) != 0))
                return bad_plan(err, name, "its rows do not split into heads of an even size");
            const uint64_t W = s->xform == TBX_XF_TRANSPOSE ? s->rows : s->cols;
            const tbx_dtype_info *si = tbx_file_dtype(in, it->dtype);
            /* a transpose of a block type (ggml's experts quantized, written back) decodes
             * bands of whole blocks of every view row: rows start on a block, and a band of
             * one block's width stays within TBAND_BLOCK_MAX values */
            if (s->xform == TBX_XF_TRANSPOSE && si && si->block_size > 1 &&
                (t->enc != TBX_PENC_ENCODE || (enc && enc->kind == TBX_ENC_PAYLOAD) || strided ||
                 s->cols % si->block_size || s->first % si->block_size ||
                 s->rows > TBAND_BLOCK_MAX / si->block_size))
                return bad_plan(err, name, "a transpose of a block type is decoded (not stored) "
                                "from view rows of whole blocks, a band of one block at most "
                                "2^21 values");
            if (s->xform == TBX_XF_TRANSPOSE && !si)
                return bad_plan(err, name, "a transpose of an unknown dtype");
            if (strided && (!si || si->block_size > 1 || !si->bits || si->bits % 8))
                return bad_plan(err, name, "a strided source takes values stored one by one "
                                "in whole bytes");
            if (reorder && (it->ncomp != 1 || it->layout != TBX_LAYOUT_DENSE))
                return bad_plan(err, name, "a reordered source must be one dense component");
            if (t->enc == TBX_PENC_STORED) {
                if (it->dtype != (tbx_dtype)t->dtype)
                    return bad_plan(err, name, "stored bytes keep their dtype");
                if (s->xform == TBX_XF_SCALE || s->xform == TBX_XF_ADD || s->xform == TBX_XF_ZERO)
                    return bad_plan(err, name, "stored bytes cannot be scaled");
                if (reorder && (!si || si->block_size > 1 || !si->bits || si->bits % 8))
                    return bad_plan(err, name, "only byte-sized values can be reordered as "
                                    "stored");
                if (!(t->flags & TBX_PT_WHOLE) && si && si->block_size > 1 &&
                    (s->first % si->block_size || count % si->block_size))
                    return bad_plan(err, name, "a range of a block type must be whole blocks");
                if (!(t->flags & TBX_PT_WHOLE) && !reorder && (it->ncomp != 1 ||
                    it->layout != TBX_LAYOUT_DENSE))
                    return bad_plan(err, name, "a range of stored bytes needs a dense tensor");
            } else if (enc->kind == TBX_ENC_PAYLOAD) {
                if (count % cols || (reorder && W != cols))
                    return bad_plan(err, name, "an MCF payload takes whole rows of a source");
            } else if (ounit > 1 && (count % ounit || (reorder && W % ounit))) {
                return bad_plan(err, name, "a block type takes whole blocks of a source");
            }
            if (qw && (count % cols || (reorder && W != cols)))
                return bad_plan(err, name, "an importance matrix takes whole rows of a source");
        }
        if (gleft) return bad_plan(err, name, "an interleaved group is cut short");
        if (sum != nelems) return bad_plan(err, name, "its sources do not hold its values");
    }
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Declaring                                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* The first source's input tensor of output tensor k (UINT64_MAX: generated). */
static uint64_t first_input(const tbx_plan *p, size_t k) {
    const tbx_plan_tensor *t = &p->t[k];
    if (t->flags & TBX_PT_WHOLE) return t->src;
    if ((t->flags & TBX_PT_GEN) || !t->nsrc) return UINT64_MAX;
    return p->srcs[t->src].tensor;
}

/* Does output tensor k carry bytes? (A whole input tensor without data does not.) */
static bool has_data(const tbx_plan *p, const tbx_file *in, size_t k) {
    const tbx_plan_tensor *t = &p->t[k];
    return !(t->flags & TBX_PT_WHOLE) || in->tensors[t->src].ncomp >= 1;
}

/* Reads source s's values [first, first + n) of its view as f32 into out (calling thread;
 * a strided source: out holds n x step values, the run read whole and then packed). */
static tbx_status read_values(eng *e, const tbx_plan_src *s, uint64_t first, uint64_t n,
                              float *out) {
    const uint64_t step = src_step(s);
    if (step == 1 || n == 0)
        return tbx_tensor_read_f32(e->in, s->tensor, s->first + first, n, out, e->err);
    tbx_status st = tbx_tensor_read_f32(e->in, s->tensor, s->first + first * step,
                                        (n - 1) * step + 1, out, e->err);
    if (st == TBX_OK) pack_strided((uint8_t *)out, n, step, sizeof *out);
    return st;
}

/* The default clip range of tensor k: +-m, m the largest |value| among its finite values (0
 * when there is none), the values read in bounded runs (transformed: scaled or shifted). */
static tbx_status scan_clip(eng *e, size_t k, float *lo, float *hi) {
    tbx_status st = TBX_OK;
    float m = 0;
    if (!e->scan && !(e->scan = tbx_malloc(&e->in->al, (size_t)SCAN_VALUES * sizeof(float))))
        return tbx_err_nomem(e->err, "quantization buffer");
    for (uint32_t j = 0, ns = tbx_plan_nsrc(e->p, k); st == TBX_OK && j < ns; j++) {
        tbx_plan_src tmp;
        const tbx_plan_src *s = tbx_plan_src_at(e->p, e->in, k, j, &tmp);
        const uint64_t n = s->rows * s->cols, per = SCAN_VALUES / src_step(s);
        for (uint64_t a = 0; st == TBX_OK && a < n; a += per) {
            const uint64_t c = n - a < per ? n - a : per;
            st = read_values(e, s, a, c, e->scan);
            for (uint64_t i = 0; st == TBX_OK && i < c; i++) {
                float v = e->scan[i];
                if (s->xform == TBX_XF_SCALE) v *= s->k;
                else if (s->xform == TBX_XF_ADD) v += s->k;
                else if (s->xform == TBX_XF_ZERO) v = 0.0f;
                const float a2 = fabsf(v);
                if (isfinite(a2) && a2 > m) m = a2;
            }
        }
    }
    *lo = -m;
    *hi = m;
    return st;
}

static tbx_status declare(eng *e, size_t k) {
    tbx_plan_tensor *t = &e->p->t[k];
    size_t nl;
    const char *name = tbx_plan_name(e->p, e->in, k, &nl);
    if (t->enc == TBX_PENC_REFUSE) {
        char why[200] = "";
        if (e->p->reason) e->p->reason(e->p, e->in, k, why, sizeof why);
        return tbx_err(e->err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "tensor", "tensor \"%s\": %s",
                       name, why);
    }
    uint32_t ndim;
    const uint64_t *shape = tbx_plan_shape(e->p, e->in, k, &ndim);
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = name;
    d.name_len = nl;
    d.dtype = (tbx_dtype)t->dtype;
    d.ndim = ndim;
    d.shape = shape;
    d.has_data = has_data(e->p, e->in, k);
    const tbx_encoder *enc = t->enc == TBX_PENC_ENCODE ? tbx_encoder_for(d.dtype) : NULL;
    if (enc && enc->kind == TBX_ENC_PAYLOAD) {
        /* its description: the clip range (scanned now when not given: the header records
         * it) and the encoder's geometry, kept in the plan (the writer borrows it) */
        float lo = 0, hi = 0;
        tbx_status st = TBX_OK;
        if (t->flags & TBX_PT_CLIP_SCAN) st = scan_clip(e, k, &lo, &hi);
        else lo = (float)t->quant->clip_min, hi = (float)t->quant->clip_max;
        if (st != TBX_OK) return st;
        tbx_quant_info *q = tbx_plan_alloc(e->p, sizeof *q);
        if (!q) return tbx_err_nomem(e->err, "quantization descriptions");
        if (enc->describe(enc, shape[0], shape[1], lo, hi, q) != TBX_OK)
            return tbx_err(e->err, TBX_E_OVERFLOW, TBX_NO_OFFSET, name,
                           "tensor \"%s\": quantized size overflows", name);
        t->quant = q;
        return tbx_writer_add_quant_tensor(e->w, &d, q, NULL, e->err);
    }
    if (!t->quant) return tbx_writer_add_tensor(e->w, &d, NULL, e->err);
    /* kept with its quantization: the target stores it exactly, or the refusal says what
     * helps */
    tbx_status st = tbx_writer_add_quant_tensor(e->w, &d, t->quant, NULL, e->err);
    if (st == TBX_E_UNSUPPORTED || st == TBX_E_LOSSY || st == TBX_E_FORMAT) {
        char hint[400];
        snprintf(hint, sizeof hint, "tensor \"%s\" is quantized; allow dequantizing it with "
                 "--dequantize", name);
        tbx_convert_hint(e->err, hint);
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Workers: decode, reorder, transform, encode                                                 */
/* ------------------------------------------------------------------------------------------ */
/* out (nc rows of R values of esz bytes) = the transpose of R rows of nc values, row r at
 * in + r * stride values; in 64 x 64 tiles. */
static void transpose(const uint8_t *in, uint64_t stride, uint64_t R, uint64_t nc, size_t esz,
                      uint8_t *out) {
    for (uint64_t r0 = 0; r0 < R; r0 += TILE)
        for (uint64_t c0 = 0; c0 < nc; c0 += TILE) {
            const uint64_t r1 = R - r0 < TILE ? R : r0 + TILE, c1 = nc - c0 < TILE ? nc : c0 + TILE;
            if (esz == 4) {
                for (uint64_t c = c0; c < c1; c++)
                    for (uint64_t r = r0; r < r1; r++)
                        memcpy(out + (c * R + r) * 4, in + (r * stride + c) * 4, 4);
            } else {
                for (uint64_t c = c0; c < c1; c++)
                    for (uint64_t r = r0; r < r1; r++)
                        memcpy(out + (c * R + r) * esz, in + (r * stride + c) * esz, esz);
            }
        }
}

/* out = rows [r0, r0 + nr) of in (head-aligned view rows, rowb bytes each) in llama's order. */
static void permute(const tbx_plan_src *s, uint64_t r0, uint64_t nr, size_t rowb,
                    const uint8_t *in, uint8_t *out) {
    for (uint64_t r = 0; r < nr; r++)
        memcpy(out + r * rowb, in + (perm_row(s, r0 + r) - r0) * rowb, rowb);
}

static void job_run(tbx_task *task) {
    eslot *sl = (eslot *)task;
    const eng *e = sl->e;
    const esrc *src = &sl->src;
    sl->st = TBX_OK;
    sl->res = NULL;
    sl->res_len = 0;
    sl->sse = 0;
    sl->sse_ref = 0;
    memset(&sl->chk, 0, sizeof sl->chk);
    const uint64_t n = sl->n;
    if (e->penc == TBX_PENC_STORED) { /* stored bytes, reordered */
        const size_t esz = (size_t)src->esz;
        if (sl->kind == J_PBLOCK) {
            permute(&src->s, sl->a, sl->nr, (size_t)src->s.cols * esz, sl->in, sl->out);
            sl->res = sl->out;
        } else if (sl->kind == J_TBAND) {
            transpose(sl->in, sl->stride, sl->nruns, sl->run, esz, sl->out);
            sl->res = sl->out;
        } else {
            sl->res = sl->in; /* gathered in order already */
        }
        sl->res_len = (size_t)(n * esz);
        return;
    }
    /* the values as f32 in f */
    float *x = sl->f;
    if ((src->in == IN_RAW || src->in == IN_MAP) && !sl->direct) {
        const size_t rb = (size_t)(sl->run * src->esz);
        for (uint64_t r = 0; r < sl->nruns && sl->st == TBX_OK; r++)
            sl->st = tbx_decode_f32_info(src->di, src->dt, sl->in + r * sl->stride * src->esz, rb,
                                         sl->run, x + r * sl->run);
        if (sl->st != TBX_OK) return;
    }
    if (sl->kind == J_PBLOCK) {
        permute(&src->s, sl->a, sl->nr, (size_t)src->s.cols * 4, (const uint8_t *)x,
                (uint8_t *)sl->g);
        x = sl->g;
    } else if (sl->kind == J_TBAND) {
        transpose((const uint8_t *)x, sl->run, sl->nruns, sl->run, 4, (uint8_t *)sl->g);
        x = sl->g;
    }
    if (src->s.xform == TBX_XF_SCALE)
        for (uint64_t i = 0; i < n; i++) x[i] *= src->s.k;
    else if (src->s.xform == TBX_XF_ADD)
        for (uint64_t i = 0; i < n; i++) x[i] += src->s.k;
    else if (src->s.xform == TBX_XF_ZERO)
        memset(x, 0, (size_t)n * sizeof *x);
    const bool check = e->check && src->in != IN_GEN;
    if (e->enc->kind == TBX_ENC_PAYLOAD) {
        float *y = x == sl->g ? sl->f : sl->g;
        e->enc->rows(&e->pay, x, sl->out0 / e->out_cols, n / e->out_cols, e->payload, y);
        sl->sse = tbx_value_check_clip(&sl->chk, x, y, n, e->pay.clip_lo, e->pay.clip_hi,
                                       e->pay.range);
        return;
    }
    uint64_t nb = 0;
    bytes_of(e->toi, n, &nb);
    if (e->search) { /* tensorbox's search, its error and ggml's on the same values */
        e->enc->search(e->enc, x, n, sl->out);
        sl->sse = tbx_encoder_block_sse(e->enc, x, n, sl->out);
        sl->sse_ref = tbx_encoder_block_sse(e->enc, x, n, NULL);
    } else if (e->qw) { /* whole rows, each run within one expert, with its vector */
        const tbx_quant_rows_fn q = tbx_ggml_quant_rows_for(e->to);
        const uint64_t C = e->out_cols, nrows = n / C;
        const size_t rowb = (size_t)(nb / (nrows ? nrows : 1));
        for (uint64_t r = 0, g = sl->out0 / C; r < nrows;) {
            const uint64_t ex = (g + r) / e->rpe;
            uint64_t run = e->rpe - (g + r) % e->rpe;
            if (run > nrows - r) run = nrows - r;
            q(x + r * C, sl->out + r * rowb, (int64_t)run, (int64_t)C, e->qw + ex * C);
            r += run;
        }
    } else {
        e->enc->encode(e->enc, x, n, sl->out);
    }
    if (check) tbx_value_check_out(&sl->chk, e->to, x, sl->out, n);
    sl->res = sl->out;
    sl->res_len = (size_t)nb;
}

/* ------------------------------------------------------------------------------------------ */
/* The calling thread: sources, jobs, reads                                                    */
/* ------------------------------------------------------------------------------------------ */
/* The unit of input values source s is decoded in (a block type's block; else 1). */
static uint64_t in_unit(const eng *e, const tbx_plan_src *s) {
    if (e->p->t[e->k].flags & TBX_PT_GEN) return 1;
    const tbx_dtype_info *si = tbx_file_dtype(e->in, e->in->tensors[s->tensor].dtype);
    return si && si->block_size > 1 ? si->block_size : 1;
}

/* How source s of the tensor being written is read and cut into jobs (`with`: a unit its jobs
 * hold whole besides its own: an interleaved group's members are cut alike). */
static tbx_status source_setup(eng *e, const tbx_plan_src *s, uint64_t out0, uint64_t with,
                               esrc *es) {
    memset(es, 0, sizeof *es);
    es->s = *s;
    es->count = s->rows * s->cols;
    es->out0 = out0;
    const bool tr = s->xform == TBX_XF_TRANSPOSE;
    es->H = tr ? s->cols : s->rows;
    es->W = tr ? s->rows : s->cols;
    const tbx_plan_tensor *t = &e->p->t[e->k];
    const bool gen = (t->flags & TBX_PT_GEN) != 0;
    const tbx_tensor *it = gen ? NULL : &e->in->tensors[s->tensor];
    es->dt = it ? it->dtype : TBX_DT_F32;
    es->di = tbx_dtype_core_get(es->dt);
    es->esz = es->di && es->di->block_size <= 1 ? es->di->bits / 8 : 0;
    const bool stored = e->penc == TBX_PENC_STORED;
    /* stored bytes of a raw float tensor are read as they are and decoded by the workers;
     * anything else is decoded on the calling thread (tbx_tensor_read_f32) */
    if (gen) es->in = IN_GEN;
    else if (stored) es->in = IN_RAW;
    else if (!it->quant && it->ncomp == 1 && it->layout == TBX_LAYOUT_DENSE &&
             plain_float(it->dtype) && tbx_comp_served_raw(e->in, &it->comp[0]))
        es->in = IN_RAW;
    else es->in = IN_F32;
    if (es->in == IN_RAW && es->count && src_step(s) == 1) {
        tbx_error e2;
        const void *ptr;
        size_t len;
        if (tbx_tensor_map(e->in, s->tensor, &ptr, &len, &e2) == TBX_OK &&
            len >= it->nelems * es->esz)
            es->map = ptr, es->in = IN_MAP;
    }
    /* the cut: units of the encoder and of the source's decoding */
    uint64_t unit = 1;
    if (!stored && e->enc->kind == TBX_ENC_BLOCK && e->toi) unit = e->toi->block_size;
    if (e->qw) unit = e->out_cols; /* whole rows (a multiple of the block: check_plan) */
    unit = lcm64(unit, with ? with : 1);
    if (es->in == IN_F32 && it) {
        const tbx_dtype_info *si = tbx_file_dtype(e->in, it->dtype);
        if (si && si->block_size > 1) unit = lcm64(unit, si->block_size);
    }
    uint64_t per = stored && !e->o->chunk ? RAW_CHUNK / (es->esz ? es->esz : 1) : e->chunk;
    if (per > unit) per -= per % unit;
    else per = unit;
    const bool payload = !stored && e->enc->kind == TBX_ENC_PAYLOAD;
    const uint64_t prow = payload ? tbx_encoder_payload_rows(e->out_cols) : 0;
    switch (s->xform) {
    case TBX_XF_PERMUTE_HEADS: case TBX_XF_UNPERMUTE_HEADS: {
        const uint64_t d = s->rows / s->heads;
        if (payload) {
            es->kind = J_PROWS;
            es->per = prow;
        } else if (es->W <= per) {
            uint64_t rows = per / es->W;
            if (rows >= d) {
                rows -= rows % d;
                es->kind = J_PBLOCK;
            } else {
                es->kind = J_PROWS;
            }
            es->per = rows;
        } else {
            es->kind = J_PPIECE;
            es->per = per;
        }
        break;
    }
    case TBX_XF_TRANSPOSE:
        if (es->in == IN_F32 && it && in_unit(e, s) > 1) {
            /* a block type: bands of whole blocks of each view row (check_plan: rows start
             * on a block, one block's band is at most TBAND_BLOCK_MAX values) */
            const uint64_t bs = in_unit(e, s);
            uint64_t rows = es->W <= per ? per / es->W : 0;
            rows -= rows % bs;
            es->kind = J_TBAND;
            es->per = rows ? rows : bs;
        } else if (payload) {
            es->kind = J_TBAND;
            es->per = prow;
        } else if (es->W <= per) {
            es->kind = J_TBAND;
            es->per = per / es->W;
        } else {
            es->kind = J_TPIECE;
            es->per = per;
        }
        break;
    default:
        es->kind = J_SPAN;
        es->per = payload ? prow * e->out_cols : per;
        break;
    }
    return TBX_OK;
}

/* The next job of source es after position *pos (values or rows, per its kind) into slot sl;
 * false when the source has no more. */
static bool next_job(const esrc *es, uint64_t *pos, eslot *sl) {
    sl->kind = es->kind;
    sl->x = 0;
    sl->a = *pos;
    switch (es->kind) {
    case J_SPAN:
        if (*pos >= es->count) return false;
        sl->n = es->count - *pos < es->per ? es->count - *pos : es->per;
        sl->out0 = es->out0 + *pos;
        *pos += sl->n;
        return true;
    case J_PBLOCK: case J_PROWS: case J_TBAND:
        if (*pos >= es->H) return false;
        sl->nr = es->H - *pos < es->per ? es->H - *pos : es->per;
        sl->n = sl->nr * es->W;
        sl->out0 = es->out0 + *pos * es->W;
        *pos += sl->nr;
        if (es->kind == J_PBLOCK && sl->nr % (es->s.rows / es->s.heads)) sl->kind = J_PROWS;
        return true;
    default: { /* J_PPIECE, J_TPIECE: *pos counts values of the output view */
        if (*pos >= es->count) return false;
        const uint64_t row = *pos / es->W, x = *pos % es->W;
        sl->a = row;
        sl->x = x;
        sl->n = es->W - x < es->per ? es->W - x : es->per;
        sl->out0 = es->out0 + *pos;
        *pos += sl->n;
        return true;
    }
    }
}

/* The byte offset in the input file of source value v (for messages), TBX_NO_OFFSET when the
 * values are not stored one by one. */
static uint64_t value_offset(const eng *e, const esrc *es, uint64_t v) {
    if (!es->esz || es->in == IN_GEN) return TBX_NO_OFFSET;
    const tbx_tensor *it = &e->in->tensors[es->s.tensor];
    return it->ncomp ? it->comp[0].offset + (es->s.first + v * src_step(&es->s)) * es->esz
                     : TBX_NO_OFFSET;
}

/* Reads one run of the source, values [v, v + n) of its view: stored bytes into raw, or
 * values into f (a strided source: the input run they lie in is read, room for n x step
 * values, and packed). */
static tbx_status read_run(eng *e, const esrc *es, uint64_t v, uint64_t n, uint8_t *raw,
                           float *f) {
    const uint64_t step = src_step(&es->s);
    if ((es->in == IN_RAW || es->in == IN_MAP) && n) {
        tbx_status st = tbx_tensor_read_range(e->in, es->s.tensor,
                                              (es->s.first + v * step) * es->esz, raw,
                                              (size_t)(((n - 1) * step + 1) * es->esz), e->err);
        if (st == TBX_OK) pack_strided(raw, n, step, (size_t)es->esz);
        return st;
    }
    if (es->in == IN_RAW || es->in == IN_MAP) return TBX_OK;
    return read_values(e, &es->s, v, n, f);
}

/* Reads the input of the job in slot sl (calling thread) and sizes its buffers. */
static tbx_status fill(eng *e, eslot *sl) {
    const esrc *es = &sl->src;
    const tbx_alloc *al = &e->in->al;
    const uint64_t n = sl->n;
    const bool stored = e->penc == TBX_PENC_STORED;
    const bool payload = !stored && e->enc->kind == TBX_ENC_PAYLOAD;
    const bool reorder = sl->kind == J_PBLOCK || sl->kind == J_TBAND;
    /* a strided source reads runs holding step x its values before packing them */
    const uint64_t nin = n * src_step(&es->s);
    /* buffers: stored bytes, values, a second set of values (reorders, decoded payloads),
     * encoded bytes */
    const bool contiguous = sl->kind == J_SPAN || sl->kind == J_PBLOCK || sl->kind == J_PPIECE;
    const bool mapped = es->in == IN_MAP && (contiguous || sl->kind == J_TBAND);
    /* little-endian f32 stored bytes are the values: read into f, not decoded */
    sl->direct = !stored && es->dt == TBX_DT_F32 && es->esz == 4 && !mapped &&
                 (es->in == IN_RAW || es->in == IN_MAP) &&
                 __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if ((es->in == IN_RAW || (es->in == IN_MAP && !mapped)) && !sl->direct &&
        !ensure(al, (void **)&sl->raw, &sl->raw_cap, (size_t)(nin * es->esz)))
        return tbx_err_nomem(e->err, "conversion buffer");
    if (!stored && !ensure(al, (void **)&sl->f, &sl->f_cap, (size_t)nin * sizeof(float)))
        return tbx_err_nomem(e->err, "conversion buffer");
    if (!stored && (reorder || payload) &&
        !ensure(al, (void **)&sl->g, &sl->g_cap, (size_t)n * sizeof(float)))
        return tbx_err_nomem(e->err, "conversion buffer");
    uint64_t ob = 0;
    if (stored && reorder) ob = n * es->esz;
    else if (!stored && !payload) bytes_of(e->toi, n, &ob);
    if (ob && !ensure(al, (void **)&sl->out, &sl->out_cap, (size_t)ob))
        return tbx_err_nomem(e->err, "conversion buffer");
    uint8_t *raw = sl->direct ? (uint8_t *)sl->f : sl->raw;
    float *f = sl->f;
    sl->nruns = 1;
    sl->run = n;
    sl->stride = n;
    tbx_status st = TBX_OK;
    const tbx_plan_src *s = &es->s;
    switch (sl->kind) {
    case J_SPAN: case J_PBLOCK: case J_PPIECE: {
        uint64_t v = sl->a; /* J_SPAN: a value; J_PBLOCK: a row */
        if (sl->kind == J_PBLOCK) v = sl->a * s->cols;
        else if (sl->kind == J_PPIECE) v = perm_row(s, sl->a) * s->cols + sl->x;
        if (es->in == IN_GEN)
            st = e->p->generate(e->p, e->k, sl->out0 - es->out0, n, f, e->err);
        else if (mapped)
            sl->in = es->map + (s->first + v) * es->esz;
        else
            st = read_run(e, es, v, n, raw, f);
        if (!mapped) sl->in = raw;
        break;
    }
    case J_PROWS:
        for (uint64_t r = 0; st == TBX_OK && r < sl->nr; r++)
            st = read_run(e, es, perm_row(s, sl->a + r) * s->cols, s->cols,
                          raw ? raw + r * s->cols * es->esz : NULL, f ? f + r * s->cols : NULL);
        sl->in = raw;
        break;
    case J_TBAND: /* view rows 0..R, values [a, a + nr) of each */
        sl->nruns = s->rows;
        sl->run = sl->nr;
        if (mapped) {
            sl->in = es->map + (s->first + sl->a) * es->esz;
            sl->stride = s->cols;
            break;
        }
        sl->stride = sl->nr;
        for (uint64_t r = 0; st == TBX_OK && r < s->rows; r++)
            st = read_run(e, es, r * s->cols + sl->a, sl->nr,
                          raw ? raw + r * sl->nr * es->esz : NULL, f ? f + r * sl->nr : NULL);
        sl->in = raw;
        break;
    default: /* J_TPIECE: output row a (view column a), view rows [x, x + n) */
        for (uint64_t r = 0; st == TBX_OK && r < n; r++)
            st = read_run(e, es, (sl->x + r) * s->cols + sl->a, 1,
                          raw ? raw + r * es->esz : NULL, f ? f + r : NULL);
        sl->in = raw;
        break;
    }
    return st;
}

/* After a worker ran the job of slot sl: the mapping it read still held the file's bytes,
 * its status, then its bytes to the writer and its counts to the tensor's. */
static tbx_status finish_job(eng *e, eslot *sl, tbx_value_check *chk, double *sse) {
    const esrc *es = &sl->src;
    const bool mapped = es->in == IN_MAP && (sl->kind == J_SPAN || sl->kind == J_PBLOCK ||
                                             sl->kind == J_PPIECE || sl->kind == J_TBAND);
    tbx_status st;
    if (mapped) { /* the worker read the mapping: were those bytes still the file's? */
        const tbx_tensor *it = &e->in->tensors[es->s.tensor];
        const tbx_component *c = &it->comp[0];
        const uint64_t first = (uint64_t)(sl->in - es->map) / es->esz;
        const uint64_t span = sl->kind == J_TBAND ? (sl->nruns - 1) * sl->stride + sl->run : sl->n;
        st = tbx_source_check(tbx_file_source(e->in, c->src), c->offset + first * es->esz,
                              span * es->esz, it->name, e->err);
        if (st != TBX_OK) return st;
    }
    if (sl->st != TBX_OK) {
        const uint64_t v = sl->kind == J_SPAN ? sl->a : 0;
        return tbx_err(e->err, sl->st, value_offset(e, es, v), e->in->tensors[es->s.tensor].name,
                       "tensor \"%s\": cannot decode %s data", e->in->tensors[es->s.tensor].name,
                       dt_name(es->dt));
    }
    chk->nonfinite += sl->chk.nonfinite;
    chk->beyond += sl->chk.beyond;
    if (sl->chk.max_abs > chk->max_abs) chk->max_abs = sl->chk.max_abs;
    *sse += sl->sse; /* in job order: the same sum whatever the thread count */
    e->sse_ref += sl->sse_ref;
    if (!sl->res_len || sl->gn > 1) return TBX_OK; /* a group's: written by finish_group */
    return tbx_writer_write_tensor(e->w, e->wi, sl->res, sl->res_len, e->err);
}

/* After the workers ran the gn jobs of an interleaved group (slots from `first` in the ring of
 * S): each finished as any job, then their values (the same count, of esz bytes each) written
 * interleaved, value v of member m at v x gn + m. */
static tbx_status finish_group(eng *e, tbx_pool *pool, uint64_t first, uint64_t S,
                               tbx_value_check *chk, double *sse) {
    const eslot *l = &e->slot[first % S];
    const uint64_t gn = l->gn;
    tbx_status st = TBX_OK;
    for (uint64_t m = 0; st == TBX_OK && m < gn; m++) {
        eslot *sl = &e->slot[(first + m) % S];
        tbx_pool_wait(pool, &sl->task, true);
        st = finish_job(e, sl, chk, sse);
        if (st == TBX_OK && (sl->res_len != l->res_len || sl->gm != m))
            st = tbx_err(e->err, TBX_E_STATE, TBX_NO_OFFSET, e->name, "tensor \"%s\": the jobs of "
                         "an interleaved group do not match", e->name);
    }
    if (st != TBX_OK || !l->res_len) return st;
    const size_t len = l->res_len, esz = (size_t)(e->toi ? e->toi->bits / 8 : 0);
    if (!esz || len % esz || len > SIZE_MAX / gn)
        return tbx_err(e->err, TBX_E_STATE, TBX_NO_OFFSET, e->name, "tensor \"%s\": interleaved "
                       "values of no whole-byte size", e->name);
    if (!ensure(&e->in->al, (void **)&e->ibuf, &e->ibuf_cap, len * gn))
        return tbx_err_nomem(e->err, "conversion buffer");
    const size_t nv = len / esz;
    for (uint64_t m = 0; m < gn; m++) {
        const uint8_t *r = e->slot[(first + m) % S].res;
        uint8_t *o = e->ibuf + m * esz;
        if (esz == 4)
            for (size_t v = 0; v < nv; v++) memcpy(o + v * gn * 4, r + v * 4, 4);
        else
            for (size_t v = 0; v < nv; v++) memcpy(o + v * gn * esz, r + v * esz, esz);
    }
    return tbx_writer_write_tensor(e->w, e->wi, e->ibuf, len * gn, e->err);
}

/* The jobs of tensor e->k through the ring of slots: read on this thread, run on the workers,
 * written in order. */
/* Reports progress (the caller's callback, when there is one): `done` input bytes of e->total,
 * never less than the last value said. A non-zero return cancels the conversion. */
static tbx_status tick(eng *e, uint64_t done) {
    if (!e->o->progress) return TBX_OK;
    if (done > e->total) done = e->total;
    if (done < e->last_said) done = e->last_said;
    e->last_said = done;
    e->said = true;
    if (e->o->progress(e->o->ud, e->o->base + done, e->o->whole ? e->o->whole : e->total) != 0)
        return tbx_err(e->err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress",
                       "cancelled by the progress callback at %" PRIu64 " of %" PRIu64
                       " input bytes; nothing was written", done, e->total);
    return TBX_OK;
}

/* Tells the input where the reads after source j of tensor e->k go: its next source, else the
 * first of the next tensor that reads one (a remote input fetches its start meanwhile). */
static void say_next(eng *e, uint32_t j, uint32_t ns) {
    tbx_plan_src tmp;
    const tbx_plan_src *s = NULL;
    if (j + 1 < ns) s = tbx_plan_src_at(e->p, e->in, e->k, j + 1, &tmp);
    for (size_t k = e->k + 1; !s && k < e->p->n; k++) {
        if ((e->p->t[k].flags & TBX_PT_GEN) || !has_data(e->p, e->in, k)) continue;
        if (tbx_plan_nsrc(e->p, k) == 0) continue;
        if (!(s = tbx_plan_src_at(e->p, e->in, k, 0, &tmp))) return;
    }
    if (!s || s->tensor >= e->in->ntensors || s->xform == TBX_XF_ZERO) return;
    const tbx_dtype_info *si = tbx_file_dtype(e->in, e->in->tensors[s->tensor].dtype);
    uint64_t b0, b1;
    if (bytes_of(si, s->first, &b0) && bytes_of(si, s->first + s->rows * s->cols, &b1) && b1 > b0)
        tbx_tensor_read_next_(e->in, s->tensor, b0, b1 - b0);
}

static tbx_status run_jobs(eng *e, tbx_value_check *chk, double *sse) {
    const tbx_plan_tensor *t = &e->p->t[e->k];
    uint32_t ndim;
    const uint64_t *shape = tbx_plan_shape(e->p, e->in, e->k, &ndim);
    uint64_t nelems = 1;
    for (uint32_t d = 0; d < ndim; d++) nelems *= shape[d];
    /* a pool for a tensor of more than one job (a small one is done right here) */
    if (!e->pool_tried && nelems > e->chunk) {
        e->pool_tried = true;
        e->pool = tbx_pool_start(&e->in->al, e->threads);
        const int nth = tbx_pool_threads(e->pool);
        e->nslots = nth > 0 ? nth + 2 : 1;
        if (e->nslots > SLOTS_MAX) e->nslots = SLOTS_MAX;
    }
    tbx_pool *pool = nelems > e->chunk ? e->pool : NULL;
    const uint32_t ns = (t->flags & TBX_PT_GEN) ? 1 : tbx_plan_nsrc(e->p, e->k);
    /* an interleaved group's jobs are in flight together: room for the largest */
    uint64_t S = pool ? (uint64_t)e->nslots : 1;
    for (uint32_t j = 0; !(t->flags & TBX_PT_GEN) && j < ns; j++) {
        tbx_plan_src tmp;
        const tbx_plan_src *s = tbx_plan_src_at(e->p, e->in, e->k, j, &tmp);
        if (s->dstep > S) S = s->dstep; /* <= TBX_PLAN_DSTEP_MAX < SLOTS_MAX: check_plan */
    }
    tbx_status st = TBX_OK;
    uint32_t j = 0;            /* the (first) source being read */
    uint64_t pos[TBX_PLAN_DSTEP_MAX], out0 = 0;
    esrc es[TBX_PLAN_DSTEP_MAX];
    uint32_t gn = 1, gm = 0;   /* the sources read together (an interleaved group), the next */
    bool have = false;
    uint64_t next_read = 0, next_write = 0, vdone = 0;
    bool more = true;
    while (st == TBX_OK) {
        if (more && next_read - next_write < S) {
            eslot *sl = &e->slot[next_read % S];
            /* the next job: of the current source (or group), else of the next one */
            bool got = false;
            while (!got && more) {
                if (!have) {
                    if (j >= ns) { more = false; break; }
                    tbx_plan_src tmp, gen;
                    const tbx_plan_src *s;
                    if (t->flags & TBX_PT_GEN) {
                        memset(&gen, 0, sizeof gen);
                        gen.rows = 1;
                        gen.cols = nelems;
                        s = &gen;
                    } else {
                        s = tbx_plan_src_at(e->p, e->in, e->k, j, &tmp);
                    }
                    gn = s->dstep > 1 ? s->dstep : 1;
                    /* a group's members cut alike: the units of all their inputs */
                    uint64_t unit = 1;
                    for (uint32_t m = 0; gn > 1 && m < gn; m++)
                        unit = lcm64(unit, in_unit(e, tbx_plan_src_at(e->p, e->in, e->k, j + m,
                                                                      &tmp)));
                    for (uint32_t m = 0; st == TBX_OK && m < gn; m++) {
                        if (m) s = tbx_plan_src_at(e->p, e->in, e->k, j + m, &tmp);
                        st = source_setup(e, s, out0, unit, &es[m]);
                        pos[m] = 0;
                    }
                    if (st != TBX_OK) break;
                    say_next(e, j + gn - 1, ns); /* the source after the group */
                    out0 += es[0].count * gn;
                    have = true;
                    gm = 0;
                }
                sl->src = es[gm];
                if (next_job(&es[gm], &pos[gm], sl)) {
                    got = true;
                    sl->gm = (uint8_t)gm;
                    sl->gn = (uint8_t)gn;
                    gm = gm + 1 < gn ? gm + 1 : 0;
                } else if (gm == 0) {
                    have = false;
                    j += gn;
                } else {
                    st = tbx_err(e->err, TBX_E_STATE, TBX_NO_OFFSET, e->name, "tensor \"%s\": "
                                 "the sources of an interleaved group end apart", e->name);
                }
            }
            if (st != TBX_OK) break;
            if (got) {
                sl->e = e;
                sl->task.run = job_run;
                st = fill(e, sl);
                if (st != TBX_OK) break;
                tbx_pool_submit(pool, &sl->task);
                next_read++;
                /* write what is finished already, without waiting */
                if (!tbx_pool_wait(pool, &e->slot[next_write % S].task, false)) continue;
            }
        }
        if (next_write == next_read) break; /* nothing in flight and nothing left */
        eslot *sl = &e->slot[next_write % S];
        if (sl->gn > 1) { /* an interleaved group: once all its jobs are read */
            if (next_read - next_write < sl->gn) {
                if (more) continue;
                st = tbx_err(e->err, TBX_E_STATE, TBX_NO_OFFSET, e->name, "tensor \"%s\": an "
                             "interleaved group is cut short", e->name);
                break;
            }
            const uint64_t g = sl->gn;
            st = finish_group(e, pool, next_write, S, chk, sse);
            for (uint64_t m = 0; m < g; m++) vdone += e->slot[(next_write + m) % S].n;
            next_write += g;
        } else {
            tbx_pool_wait(pool, &sl->task, true);
            st = finish_job(e, sl, chk, sse);
            next_write++;
            vdone += sl->n;
        }
        if (st == TBX_OK && nelems)
            st = tick(e, e->done + (uint64_t)((double)e->cur_in * (double)vdone / (double)nelems));
    }
    tbx_pool_drain(pool);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Stored bytes that pass unchanged                                                            */
/* ------------------------------------------------------------------------------------------ */
static tbx_status copy_stored(eng *e, const tbx_plan_src *s, bool whole) {
    tbx_file *in = e->in;
    const tbx_tensor *it = &in->tensors[s->tensor];
    const uint64_t i = s->tensor;
    tbx_status st = TBX_OK;
    if (it->ncomp == 0) return TBX_OK;
    if (!e->cbuf && !(e->cbuf = tbx_malloc(&in->al, COPY_BUF)))
        return tbx_err_nomem(e->err, "convert buffer");
    if (it->ncomp > 1) {
        /* a quantized tensor kept as such (zTensor quantized_group): its components' decoded
         * bytes one after the other, each in COPY_BUF pieces */
        for (uint32_t c = 0; st == TBX_OK && c < it->ncomp; c++)
            for (uint64_t q = 0; st == TBX_OK && q < it->comp[c].nbytes; q += COPY_BUF) {
                const uint64_t left = it->comp[c].nbytes - q;
                const size_t n = (size_t)(left < COPY_BUF ? left : COPY_BUF);
                st = tbx_component_read_range(in, i, c, q, e->cbuf, n, e->err);
                if (st == TBX_OK) st = tbx_writer_write_tensor(e->w, e->wi, e->cbuf, n, e->err);
            }
        return st;
    }
    const tbx_component *c = &it->comp[0];
    uint64_t b0 = 0, len = c->nbytes;
    if (!whole) {
        const tbx_dtype_info *si = tbx_file_dtype(in, it->dtype);
        uint64_t end;
        if (!bytes_of(si, s->first, &b0) || !bytes_of(si, s->first + s->rows * s->cols, &end))
            return tbx_err(e->err, TBX_E_OVERFLOW, TBX_NO_OFFSET, it->name,
                           "tensor \"%s\": range overflows", it->name);
        len = end - b0;
    }
    if (tbx_comp_served_raw(in, c) || in->drv->read_component_range) {
        /* raw bytes from the source, encoded ones through the driver's decoding cursor: one
         * pass in pieces, whatever size the tensor declares */
        int fd;
        uint64_t off;
        const bool kernel = tbx_writer_copies_fd_(e->w) && tbx_file_fd_range_(in, i, b0, len, &fd,
                                                                               &off);
        const uint64_t piece = kernel ? COPY_PIECE : COPY_BUF;
        for (uint64_t q = 0; st == TBX_OK && q < len; q += piece) {
            const uint64_t n = len - q < piece ? len - q : piece;
            if (kernel) {
                st = tbx_writer_copy_fd_(e->w, e->wi, fd, off + q, n, e->err);
            } else {
                st = tbx_tensor_read_range(in, i, b0 + q, e->cbuf, (size_t)n, e->err);
                if (st == TBX_OK) st = tbx_writer_write_tensor(e->w, e->wi, e->cbuf, (size_t)n,
                                                               e->err);
            }
            if (st == TBX_OK) st = tick(e, e->done + q + n);
        }
        return st;
    }
    /* a driver that decodes only whole components (big-endian GGUF) */
    size_t need = 0;
    tbx_tensor_read(in, i, NULL, 0, &need, e->err);
    uint8_t *buf = tbx_malloc(&in->al, need);
    if (!buf) return tbx_err_nomem(e->err, "tensor buffer");
    st = tbx_tensor_read(in, i, buf, need, NULL, e->err);
    if (st == TBX_OK && (b0 > need || len > need - b0))
        st = tbx_err(e->err, TBX_E_RANGE, TBX_NO_OFFSET, it->name, "tensor \"%s\": range beyond "
                     "its bytes", it->name);
    if (st == TBX_OK) st = tbx_writer_write_tensor(e->w, e->wi, buf + b0, (size_t)len, e->err);
    tbx_free(&in->al, buf, need);
    return st;
}

/* A TBX_XF_MXFP4_HF source: its rows of blocks read in runs of about RAW_CHUNK bytes, each
 * block written as ggml's block_mxfp4 (the scale, then the nibbles reordered: byte j of the
 * output holds values j and j + 16, the input's byte j values 2j and 2j + 1). */
static tbx_status pack_mxfp4(eng *e, const tbx_plan_src *s, uint64_t *written) {
    tbx_file *in = e->in;
    const uint64_t step = src_step(s), C = s->cols;
    uint64_t g = RAW_CHUNK / (C * 16 * step + 1);
    if (g == 0) g = 1;
    if (g > s->rows) g = s->rows;
    if (g == 0) return TBX_OK;
    const uint64_t span = ((g - 1) * step + 1) * C; /* blocks read for g rows */
    const size_t nb = (size_t)(span * 16), ns = (size_t)span, no = (size_t)(g * C * 17);
    uint8_t *bb = tbx_malloc(&in->al, nb), *sb = tbx_malloc(&in->al, ns),
            *ob = tbx_malloc(&in->al, no);
    tbx_status st = TBX_OK;
    if (!bb || !sb || !ob) st = tbx_err_nomem(e->err, "MXFP4 repack buffers");
    for (uint64_t r0 = 0; st == TBX_OK && r0 < s->rows; r0 += g) {
        const uint64_t nr = s->rows - r0 < g ? s->rows - r0 : g;
        const uint64_t b0 = s->first + r0 * step * C, nspan = ((nr - 1) * step + 1) * C;
        st = tbx_tensor_read_range(in, s->tensor, b0 * 16, bb, (size_t)(nspan * 16), e->err);
        if (st == TBX_OK)
            st = tbx_tensor_read_range(in, s->aux, b0, sb, (size_t)nspan, e->err);
        if (st != TBX_OK) break;
        uint8_t *o = ob;
        for (uint64_t r = 0; r < nr; r++)
            for (uint64_t c = 0; c < C; c++, o += 17) {
                const uint64_t b = r * step * C + c;
                const uint8_t *q = bb + b * 16;
                o[0] = sb[b];
                for (int j = 0; j < 16; j++) {
                    /* value v is nibble v % 2 of input byte v / 2 */
                    const uint8_t lo = (uint8_t)((q[j / 2] >> (4 * (j % 2))) & 15);
                    const uint8_t hi = (uint8_t)((q[8 + j / 2] >> (4 * (j % 2))) & 15);
                    o[1 + j] = (uint8_t)(lo | hi << 4);
                }
            }
        st = tbx_writer_write_tensor(e->w, e->wi, ob, (size_t)(nr * C * 17), e->err);
        *written += nr * C * 17;
        if (st == TBX_OK) st = tick(e, e->done + *written);
    }
    tbx_free(&in->al, bb, bb ? nb : 0);
    tbx_free(&in->al, sb, sb ? ns : 0);
    tbx_free(&in->al, ob, ob ? no : 0);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* One tensor                                                                                  */
/* ------------------------------------------------------------------------------------------ */
/* The input bytes behind output tensor k (progress). */
static uint64_t input_bytes(const eng *e, size_t k) {
    uint64_t total = 0;
    if (e->p->t[k].flags & TBX_PT_GEN) return 0;
    for (uint32_t j = 0, ns = tbx_plan_nsrc(e->p, k); j < ns; j++) {
        tbx_plan_src tmp;
        const tbx_plan_src *s = tbx_plan_src_at(e->p, e->in, k, j, &tmp);
        const tbx_tensor *it = &e->in->tensors[s->tensor];
        if (!it->ncomp) continue;
        if (s->xform == TBX_XF_MXFP4_HF) { /* 17 bytes a block read, as written */
            total += s->rows * s->cols * 17;
            continue;
        }
        const uint64_t nb = it->comp[0].nbytes, count = s->rows * s->cols;
        if ((e->p->t[k].flags & TBX_PT_WHOLE) || count == it->nelems) total += nb;
        else if (it->nelems) total += (uint64_t)((double)nb * (double)count / (double)it->nelems);
    }
    return total;
}

uint64_t tbx_engine_input_total(tbx_file *in, tbx_plan *p) {
    eng e;
    memset(&e, 0, sizeof e);
    e.in = in;
    e.p = p;
    uint64_t total = 0;
    for (size_t k = 0; k < p->n; k++)
        if (has_data(p, in, k)) total += input_bytes(&e, k);
    return total;
}

/* The warnings of a report as one phrase ("" when none). */
static void warn_text(const tbx_convert_report *r, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    if (r->beyond) {
        int k = snprintf(buf, cap, "%llu finite value%s beyond %s's range (+-%g: no finite f16 "
                         "scale reaches %s; the largest is %g)", (unsigned long long)r->beyond,
                         r->beyond == 1 ? "" : "s", dt_name(r->to), r->range,
                         r->beyond == 1 ? "it" : "them", r->max_abs);
        n = k > 0 && (size_t)k < cap ? (size_t)k : cap - 1;
    }
    if (r->nonfinite && n + 2 < cap)
        snprintf(buf + n, cap - n, "%s%llu finite value%s came out as Inf or NaN", n ? "; " : "",
                 (unsigned long long)r->nonfinite, r->nonfinite == 1 ? "" : "s");
}

/* Reports tensor k (o->on_tensor) once its bytes are written; under o->strict a warning
 * fails the conversion. */
static tbx_status report(eng *e, size_t k, uint64_t nvalues, const tbx_value_check *c,
                         double sse) {
    const tbx_plan_tensor *t = &e->p->t[k];
    const uint64_t src = first_input(e->p, k);
    char why[200] = "";
    tbx_convert_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.tensor = e->p->report_input_index && src != UINT64_MAX ? src : k;
    r.name = tbx_plan_name(e->p, e->in, k, NULL);
    r.from = src == UINT64_MAX ? TBX_DT_F32 : e->in->tensors[src].dtype;
    r.to = (tbx_dtype)t->dtype;
    r.action = (tbx_convert_action)t->action;
    if (e->p->reason) e->p->reason(e->p, e->in, k, why, sizeof why);
    if (e->p->qw_why && e->p->qw_why[k] != TBX_QW_NONE) {
        static const char *const qw_text[] = {
            "", "with its importance matrix", "without an importance matrix (none for it)",
            "without an importance matrix (its entry has another size)"};
        const size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, "%s%s", n ? ", " : "", qw_text[e->p->qw_why[k] & 3]);
    }
    r.reason = why;
    r.nvalues = nvalues;
    r.nonfinite = c->nonfinite;
    r.beyond = c->beyond;
    r.range = (double)tbx_quant_range(r.to);
    r.max_abs = (double)c->max_abs;
    r.rmse = r.rmse_ggml = NAN;
    if ((t->flags & TBX_PT_SEARCH) && nvalues) {
        r.rmse = sqrt(sse / (double)nvalues);
        r.rmse_ggml = sqrt(e->sse_ref / (double)nvalues);
    }
    if (c->nonfinite) r.warnings |= TBX_CONVERT_WARN_NONFINITE;
    if (c->beyond) r.warnings |= TBX_CONVERT_WARN_RANGE;
    if (e->o->on_tensor) e->o->on_tensor(e->o->ud, &r);
    if (r.warnings && e->o->strict) {
        char wt[256];
        warn_text(&r, wt, sizeof wt);
        return tbx_err(e->err, TBX_E_LOSSY, TBX_NO_OFFSET, r.name,
                       "tensor \"%s\" (%s -> %s): %s; refused under --strict "
                       "(TBX_CONVERT_STRICT)", r.name, dt_name(r.from), dt_name(r.to), wt);
    }
    return TBX_OK;
}

static tbx_status write_tensor(eng *e, size_t k) {
    const tbx_plan_tensor *t = &e->p->t[k];
    tbx_value_check chk;
    memset(&chk, 0, sizeof chk);
    if (!has_data(e->p, e->in, k)) return report(e, k, 0, &chk, 0); /* nothing to write */
    e->k = k;
    e->name = tbx_plan_name(e->p, e->in, k, NULL);
    e->penc = t->enc;
    e->to = (tbx_dtype)t->dtype;
    e->enc = t->enc == TBX_PENC_ENCODE ? tbx_encoder_for(e->to) : NULL;
    e->toi = tbx_dtype_core_get(e->to);
    e->check = t->enc == TBX_PENC_ENCODE && !(t->flags & TBX_PT_GEN);
    e->search = e->enc && e->enc->kind == TBX_ENC_BLOCK && e->enc->search &&
                (t->flags & TBX_PT_SEARCH);
    e->sse_ref = 0;
    uint32_t ndim;
    const uint64_t *shape = tbx_plan_shape(e->p, e->in, k, &ndim);
    e->out_cols = ndim ? shape[ndim - 1] : 1;
    uint64_t nelems = 1;
    for (uint32_t d = 0; d < ndim; d++) nelems *= shape[d];
    e->qw = e->enc && e->p->qw ? e->p->qw[k] : NULL;
    e->rpe = ndim == 3 ? shape[1] : (e->out_cols ? nelems / e->out_cols : 1);
    if (!e->rpe) e->rpe = 1;
    tbx_status st = TBX_OK;
    double sse = 0;
    uint64_t nvalues = 0;
    const bool plain_copy = t->enc == TBX_PENC_STORED;
    bool reorders = false, mxfp4 = false;
    for (uint32_t j = 0, ns = tbx_plan_nsrc(e->p, k); plain_copy && j < ns; j++) {
        tbx_plan_src tmp;
        const tbx_plan_src *s = tbx_plan_src_at(e->p, e->in, k, j, &tmp);
        reorders |= s->xform != TBX_XF_NONE || src_step(s) > 1 || s->dstep > 1;
        mxfp4 |= s->xform == TBX_XF_MXFP4_HF;
    }
    if (mxfp4) { /* check_plan: every source of the tensor is one */
        uint64_t written = 0;
        for (uint32_t j = 0, ns = tbx_plan_nsrc(e->p, k); st == TBX_OK && j < ns; j++) {
            tbx_plan_src tmp;
            st = pack_mxfp4(e, tbx_plan_src_at(e->p, e->in, k, j, &tmp), &written);
        }
    } else if (plain_copy && !reorders) {
        for (uint32_t j = 0, ns = tbx_plan_nsrc(e->p, k); st == TBX_OK && j < ns; j++) {
            tbx_plan_src tmp;
            st = copy_stored(e, tbx_plan_src_at(e->p, e->in, k, j, &tmp),
                             (t->flags & TBX_PT_WHOLE) != 0);
        }
    } else if (e->enc && e->enc->kind == TBX_ENC_PAYLOAD) {
        /* an MCF payload: built whole, then written */
        const tbx_quant_info *q = t->quant;
        st = e->enc->begin(e->enc, shape[0], shape[1],
                           (t->flags & TBX_PT_MANTLE) ? TBX_MCFQ_METHOD_MANTLE
                                                      : TBX_MCFQ_METHOD_BEST,
                           (float)q->clip_min, (float)q->clip_max, &e->pay);
        if (st != TBX_OK)
            return tbx_err(e->err, st, TBX_NO_OFFSET, e->name,
                           "tensor \"%s\": quantized size overflows", e->name);
        const uint64_t total = e->pay.total;
        if (total > e->in->limits.max_tensor_bytes || total > SIZE_MAX)
            return tbx_err(e->err, TBX_E_LIMIT, TBX_NO_OFFSET, e->name,
                           "tensor \"%s\": quantized payload of %" PRIu64 " bytes exceeds the "
                           "max_tensor_bytes limit", e->name, total);
        e->payload = total ? tbx_calloc(&e->in->al, (size_t)total, 1) : NULL;
        if (total && !e->payload) return tbx_err_nomem(e->err, "quantized payload");
        if (total) e->enc->head(&e->pay, e->payload);
        st = run_jobs(e, &chk, &sse);
        for (uint64_t q2 = 0; st == TBX_OK && q2 < total; q2 += PAYLOAD_PIECE) {
            const size_t n = (size_t)(total - q2 < PAYLOAD_PIECE ? total - q2 : PAYLOAD_PIECE);
            st = tbx_writer_write_tensor(e->w, e->wi, e->payload + q2, n, e->err);
        }
        tbx_free(&e->in->al, e->payload, e->payload ? (size_t)total : 0);
        e->payload = NULL;
        nvalues = nelems;
        if (st == TBX_OK && e->o->on_quant)
            e->o->on_quant(e->o->ud, e->p->report_input_index ? first_input(e->p, k) : k,
                           nvalues, sse);
    } else {
        st = run_jobs(e, &chk, &sse);
        if (e->check) nvalues = nelems;
    }
    if (st == TBX_OK) st = report(e, k, nvalues, &chk, sse);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_engine_run(tbx_file *in, tbx_plan *p, tbx_writer *w, const tbx_engine_opts *o,
                          tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!in || !p || !w || !o)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "engine", "NULL argument");
    tbx_status st = check_plan(in, p, err);
    if (st != TBX_OK) return st;
    eng e;
    memset(&e, 0, sizeof e);
    e.in = in;
    e.p = p;
    e.w = w;
    e.o = o;
    e.err = err;
    e.threads = o->threads > 0 ? o->threads : tbx_threads_default();
    e.chunk = o->chunk ? o->chunk : CHUNK_VALUES;
    e.nslots = 1;
    /* the input handle and the plan outlive the writer: names and shapes are lent */
    st = tbx_writer_borrow_descs_(w, p->n, p->names, err);
    for (size_t k = 0; st == TBX_OK && k < p->n; k++) st = declare(&e, k);
    for (size_t k = 0; st == TBX_OK && k < p->n; k++)
        if (has_data(p, in, k)) e.total += input_bytes(&e, k);
    for (size_t k = 0; st == TBX_OK && k < p->n; k++) {
        e.wi = k;
        e.cur_in = has_data(p, in, k) ? input_bytes(&e, k) : 0;
        st = write_tensor(&e, k);
        e.done += e.cur_in;
        if (st == TBX_OK) st = tick(&e, e.done);
    }
    /* the last call says done == total (a plan of no data: 0 of 0), once */
    if (st == TBX_OK && o->progress && (!e.said || e.last_said != e.total)) {
        e.last_said = e.total;
        if (o->progress(o->ud, o->base + e.total, o->whole ? o->whole : e.total) != 0)
            st = tbx_err(err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress", "cancelled by the "
                         "progress callback at the end; nothing was written");
    }
    tbx_pool_stop(e.pool);
    for (int s = 0; s < SLOTS_MAX; s++) {
        eslot *sl = &e.slot[s];
        tbx_free(&in->al, sl->raw, sl->raw_cap);
        tbx_free(&in->al, sl->f, sl->f_cap);
        tbx_free(&in->al, sl->g, sl->g_cap);
        tbx_free(&in->al, sl->out, sl->out_cap);
    }
    tbx_free(&in->al, e.cbuf, e.cbuf ? COPY_BUF : 0);
    tbx_free(&in->al, e.ibuf, e.ibuf_cap);
    tbx_free(&in->al, e.scan, e.scan ? (size_t)SCAN_VALUES * sizeof(float) : 0);
    return st;
}
