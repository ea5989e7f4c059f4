/*
 * plan.h - a conversion as data (src/core/plan.c): every tensor of the output, where its
 * values come from, what is done to them on the way and how they are stored, decided before
 * anything is written. The plain conversion (src/convert/plain.c) and the Hugging Face ->
 * GGUF one (src/models/hf_gguf.c) build plans; the engine (src/convert/engine.c) carries any
 * plan out into an open writer; the façade (src/api/conversions.c) chooses the plan, opens the
 * writer and runs the engine. The plan lives in core, below both its makers and the engine,
 * because it is plain data about a conversion, as the model is data about a file: it names
 * input tensors by index and dtypes by value and calls nothing.
 *
 * An output tensor (tbx_plan_tensor) has
 *   - a name, a dtype and a shape (NULL name / shape: the input tensor's own, for a tensor
 *     that is one whole input tensor: TBX_PT_WHOLE);
 *   - its values: one or several sources (tbx_plan_src), their values concatenated in order
 *     (row-major): a source is a run of an input tensor's values seen as [rows, cols], so a
 *     fused qkv splits into three outputs (three row ranges of one input), several inputs join
 *     into one, and MoE experts stack into one [n_expert, rows, cols]; a source may take every
 *     step-th value (a de-interleave), and several sources may fill one run of the output
 *     together, interleaved value by value (dstep: the way back of that de-interleave); each
 *     source has one transform: none, llama's q/k row
 *     order by heads, a transpose of its [rows, cols] view, a scale or an added constant. Or
 *     a generator (TBX_PT_GEN: the plan's `generate` hook gives its f32 values, e.g. llama3's
 *     rope_freqs);
 *   - its encoding: the stored bytes as they are (TBX_PENC_STORED: the sources' bytes, moved
 *     by the kernel when nothing changes them), or the values encoded to the output dtype by
 *     its encoder (TBX_PENC_ENCODE: src/quant/encode.h finds it by dtype: a float cast, a ggml
 *     block type, an MCF family with its clip range and method), or a refusal made when the
 *     tensor is declared (TBX_PENC_REFUSE: the reason says why);
 *   - the quantization description declared with it (a kept quantized tensor: the input's;
 *     an MCF family: made by the engine when it declares the tensor, from the clip range the
 *     plan gives or the engine's scan of the values, and kept in the plan's memory);
 *   - why it is what it is (action and a reason code; the plan's `reason` hook makes the
 *     phrase of tbx_convert_report.reason).
 * Metadata and sections are not part of a plan: they go through the writer API as they are.
 */
#ifndef TBX_PLAN_H
#define TBX_PLAN_H

#include "model.h"

/* The transform of a source (tbx_plan_src.xform). */
typedef enum tbx_xform {
    TBX_XF_NONE = 0,
    /* llama's rotary row order: the [rows, cols] view is `heads` heads of d = rows / heads rows
     * (d even); output row h*d + 2j + i is input row h*d + i*d/2 + j (i in 0..1, j < d/2) */
    TBX_XF_PERMUTE_HEADS = 1,
    TBX_XF_TRANSPOSE = 2, /* the [rows, cols] view is written as [cols, rows] */
    TBX_XF_SCALE = 3,     /* each value times k (computed in f32) */
    TBX_XF_ADD = 4,       /* each value plus k (Gemma's norms: + 1) */
    /* the inverse of TBX_XF_PERMUTE_HEADS (GGUF -> Hugging Face): output row h*d + i*d/2 + j
     * is input row h*d + 2j + i */
    TBX_XF_UNPERMUTE_HEADS = 5,
    /* every value of the view written as +0 (decoded and encoded as any other): rows the
     * output has and its input does not carry (GGUF -> Hugging Face: RoBERTa's padding
     * positions, which llama.cpp's converter drops), sized by a view of real rows */
    TBX_XF_ZERO = 6,
    /* MXFP4 kept as it is, repacked to ggml's block (gpt-oss's checkpoints; no value changes):
     * the source is a uint8 tensor of 16-byte blocks of 32 FP4 values (byte j: values 2j low
     * nibble, 2j + 1 high) and `aux` a uint8 tensor of their E8M0 scales, one a block; the view
     * is `rows` rows of `cols` blocks, `first` the first block (of both), row r starting at
     * block first + r x step x cols (step 0 or 1: consecutive rows); each block is written as
     * ggml's block_mxfp4: the scale byte, then 16 bytes whose byte j holds values j (low
     * nibble) and j + 16 (high). The output is TBX_PENC_STORED, dtype MXFP4, and counts 32
     * values a block. */
    TBX_XF_MXFP4_HF = 7
} tbx_xform;

typedef struct tbx_plan_src {
    uint64_t tensor;     /* the input tensor */
    uint64_t first;      /* the first of its values (row-major index) the view starts at */
    uint64_t rows, cols; /* the view: rows x cols consecutive values from `first` */
    uint32_t heads;      /* TBX_XF_PERMUTE_HEADS, TBX_XF_UNPERMUTE_HEADS */
    /* the values of the view are `step` apart in the input (0 or 1: consecutive): view value
     * v is input value first + v x step, so a view can take every step-th value of a run
     * (gpt-oss's gate_up_proj, whose last axis interleaves the gate's and the up's columns:
     * step 2, first even or odd); the transform applies to the view as to a consecutive one */
    uint32_t step;
    uint8_t xform;       /* tbx_xform */
    /* the output takes this source's values `dstep` apart (0 or 1: one after the other):
     * sources j .. j + dstep - 1 of a tensor, each with this dstep and the same view (rows,
     * cols, transform, heads), fill one run of dstep x rows x cols output values together,
     * value v of the m-th at the run's start + v x dstep + m (the way back of gpt-oss's
     * gate_up_proj: ffn_gate_exps' and ffn_up_exps' experts, each transposed back, interleaved
     * on the last axis: dstep 2); at most TBX_PLAN_DSTEP_MAX, into an output dtype stored value
     * by value in whole bytes (no ggml block type, no MCF payload, no importance matrix) */
    uint8_t dstep;
    float k;             /* TBX_XF_SCALE, TBX_XF_ADD */
    uint64_t aux;        /* TBX_XF_MXFP4_HF: the scales' input tensor */
} tbx_plan_src;

#define TBX_PLAN_DSTEP_MAX 4 /* tbx_plan_src.dstep */

/* tbx_plan_tensor.enc */
enum {
    TBX_PENC_STORED = 0, /* the sources' stored bytes (same dtype as the output), reordered by
                            their transform when they have one (byte-sized elements) */
    TBX_PENC_ENCODE = 1, /* decoded to f32, transformed, encoded by tbx_encoder_for(dtype) */
    TBX_PENC_REFUSE = 2  /* the tensor cannot be converted: declaring it fails
                            (TBX_E_UNSUPPORTED, "tensor "NAME": REASON") */
};

/* tbx_plan_tensor.flags */
#define TBX_PT_WHOLE     0x01u /* one whole input tensor (index `src`), no transform, no
                                  tbx_plan_src entry: name, shape and bytes are its own */
#define TBX_PT_GEN       0x02u /* no sources: the values come from plan->generate */
#define TBX_PT_CLIP_SCAN 0x04u /* an encoder taking a clip range (MCF families), none given: the
                                  engine scans the values first (+-max |finite value|, mantle's
                                  default); else `quant` holds the range (has_clip) */
#define TBX_PT_MANTLE    0x08u /* an MCF family: mantle's own method (else tensorbox's best) */
#define TBX_PT_SEARCH    0x10u /* a ggml K type: tensorbox's own search (encoder's `search`;
                                  else ggml's bytes), its error and the reference's on the same
                                  values measured for the report */

typedef struct tbx_plan_tensor {
    /* 48 bytes: a plain conversion of a million tensors holds a million of these */
    const char *name;          /* NUL-terminated; NULL: the input tensor's (TBX_PT_WHOLE) */
    const uint64_t *shape;     /* NULL: the input tensor's (TBX_PT_WHOLE) */
    /* The description declared with it (NULL: none): a kept quantized tensor's (the input's);
     * for an encoder that describes its output (MCF families), the clip range asked for (may be
     * shared by many tensors), replaced by the engine with the full description it declares
     * (made in the plan's memory) */
    const tbx_quant_info *quant;
    uint64_t src;              /* TBX_PT_WHOLE: the input tensor; else its first source in
                                  plan->srcs (nsrc of them, consecutive) */
    uint32_t name_len;
    uint32_t nsrc;
    uint16_t dtype;            /* the output dtype */
    uint16_t ndim;
    uint8_t enc;               /* TBX_PENC_* */
    uint8_t action;            /* tbx_convert_action, for the report */
    uint8_t why;               /* the plan maker's reason code (plan->reason makes the text) */
    uint8_t flags;             /* TBX_PT_* */
} tbx_plan_tensor;

/* tbx_plan.qw_why */
enum {
    TBX_QW_NONE = 0,     /* not quantized to a ggml block type: nothing to apply */
    TBX_QW_USED = 1,     /* quantized with its vector */
    TBX_QW_MISSING = 2,  /* the matrix has no entry of its name: quantized without */
    TBX_QW_MISMATCH = 3  /* token embeddings whose entry has another size: quantized without,
                            as llama-quantize does */
};

typedef struct tbx_plan tbx_plan;
struct tbx_plan {
    tbx_alloc al;                /* the plan's memory (the input handle's allocator) */
    tbx_plan_tensor *t;          /* the output tensors, in the order they are written */
    size_t n, cap;
    tbx_plan_src *srcs;
    size_t nsrcs, cap_srcs;
    /* The index of the output names when they are the input's own, in order (tensor i of the
     * plan is tensor i of the input, none left out): lent to the writer. NULL: it builds its
     * own. */
    const tbx_names *names;
    /* true: tbx_convert_report.tensor is the input index of the tensor's first source (a
     * plain conversion); false: its index in the plan (the output's) */
    bool report_input_index;
    /* The maker's hooks and their data (may be NULL when no tensor needs them): the reason
     * phrase of tensor k (buf gets "" when nothing was asked of it), and the values
     * [first, first + n) of a generated tensor k (TBX_PT_GEN). */
    void *ud;
    void (*reason)(const tbx_plan *p, const tbx_file *in, size_t k, char *buf, size_t cap);
    tbx_status (*generate)(const tbx_plan *p, size_t k, uint64_t first, uint64_t n, float *out,
                           tbx_error *err);
    /* An importance matrix applied to the plan (src/models/imatrix.c, tbx_imatrix_attach), or
     * NULL: for tensor k, qw[k] the vector its rows are quantized with, cols values per expert
     * (a 3-D [experts, rows, cols] tensor: expert e's rows take the e-th run), borrowed from
     * the matrix, which outlives the engine; NULL: quantized without one, qw_why[k] says why
     * (TBX_QW_*). The engine then hands whole rows to the row quantizer (ggml.h). */
    const float **qw;
    uint8_t *qw_why;
    /* memory the plan owns (names, shapes, descriptions): blocks freed with it */
    struct tbx_plan_block *blocks;
};

/* An empty plan using `al` (copied). */
void tbx_plan_init(tbx_plan *p, const tbx_alloc *al);
/* Frees everything the plan owns; accepts NULL and an initialised empty plan. */
void tbx_plan_free(tbx_plan *p);
/* Room for n tensors (and nsrcs sources) at once, exactly (a maker that knows its counts). */
tbx_status tbx_plan_reserve(tbx_plan *p, size_t n, size_t nsrcs, tbx_error *err);
/* Appends a tensor (copied; its sources follow with tbx_plan_add_src); *k gets its index. */
tbx_status tbx_plan_add(tbx_plan *p, const tbx_plan_tensor *t, size_t *k, tbx_error *err);
/* Appends a source of the last tensor added (its src and nsrc are set here). */
tbx_status tbx_plan_add_src(tbx_plan *p, const tbx_plan_src *s, tbx_error *err);
/* `n` bytes the plan owns (zeroed, 8-byte aligned; freed with it), NULL when out of memory:
 * names, shapes, descriptions that must outlive the writer. */
void *tbx_plan_alloc(tbx_plan *p, size_t n);

/* The name, shape and dimension count of output tensor k (its own, or the input tensor's). */
const char *tbx_plan_name(const tbx_plan *p, const tbx_file *in, size_t k, size_t *len);
const uint64_t *tbx_plan_shape(const tbx_plan *p, const tbx_file *in, size_t k, uint32_t *ndim);
/* Source j of output tensor k (a whole tensor's single source made up in *tmp). */
const tbx_plan_src *tbx_plan_src_at(const tbx_plan *p, const tbx_file *in, size_t k, uint32_t j,
                                    tbx_plan_src *tmp);
/* The number of sources of tensor k (1 for TBX_PT_WHOLE). */
static inline uint32_t tbx_plan_nsrc(const tbx_plan *p, size_t k) {
    return (p->t[k].flags & TBX_PT_WHOLE) ? 1u : p->t[k].nsrc;
}

#endif /* TBX_PLAN_H */
