/*
 * gguf_lint.c - tbx_gguf_lint (tensorbox/gguf.h; `tbx validate --ggml`): the rules of ggml's own
 * loader (ggml/src/gguf.cpp) and of llama.cpp's model loader that tensorbox's reader does not
 * impose, checked on a handle the GGUF driver opened. Nothing is read from the file again: the
 * rules run over the model and the layout the reader recorded (gguf_state, gguf_int.h), for
 * the first file and for every further shard of a split set:
 *
 *   header    little-endian GGUF v2 or v3 only (ggml reads neither v1 nor big-endian files)
 *   metadata  no array whose elements are arrays
 *   vocab     tokenizer.ggml.tokens, when present, has as many tokens as token_embd.weight
 *             and output.weight (when present) have rows, ne[1] (llama.cpp's check_tensor_dims)
 *   tensors   names shorter than 64 bytes; every ne[i] and the element count below 2^63 (ggml
 *             reads them as int64); offsets packed in info order, each tensor's size rounded
 *             up to the alignment: offset_0 = 0, offset_i = offset_(i-1) + padded size_(i-1)
 *
 * A general.alignment that is not a u32 and n_dims > 4 are problems of every validation
 * (gguf.c), not repeated here. Each violation goes to the caller's callback as a tbx_error
 * with the field and the byte offset the reader recorded.
 */
#include "gguf_int.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct gguf_lint_ctx {
    tbx_problem_fn cb;
    void *ud;
    tbx_status first;
} gguf_lint_ctx;

static void lint(gguf_lint_ctx *l, tbx_status code, uint64_t off, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void lint(gguf_lint_ctx *l, tbx_status code, uint64_t off, const char *field, const char *fmt, ...) {
    tbx_error e;
    va_list ap;
    va_start(ap, fmt);
    tbx_verr(&e, code, off, field, fmt, ap);
    va_end(ap);
    if (l->first == TBX_OK) l->first = code;
    if (l->cb) l->cb(l->ud, &e);
}

static bool has_nested_array(const tbx_value *v) {
    if (!v || v->type != TBX_V_ARRAY) return false;
    if (v->elem == TBX_V_ARRAY) return true;
    if (v->v.a.items)
        for (size_t i = 0; i < v->v.a.n; i++)
            if (v->v.a.items[i] && v->v.a.items[i]->type == TBX_V_ARRAY) return true;
    return false;
}

/* The ggml rules of one file of the handle (the first, or one shard of a split set; `shard` is
 * "" or " (shard K of N)"): its header, then its tensors. */
static void lint_head(gguf_lint_ctx *l, const gguf_state *s, const char *shard) {
    if (s->be || s->version < 2)
        lint(l, TBX_E_BAD_VERSION, 4, "version",
             "ggml reads only little-endian GGUF v2 and v3; this file%s is %s-endian v%" PRIu32,
             shard, s->be ? "big" : "little", s->version);
    /* a general.alignment that is not a u32 is reported by every validation, not again here */
}

static void lint_tensors(gguf_lint_ctx *l, tbx_file *f, const gguf_state *s, const char *shard) {
    uint64_t expect = 0;
    for (size_t i = 0; i < s->nti; i++) {
        const gguf_tensor_info *ti = &s->ti[i];
        const tbx_tensor *t = &f->tensors[ti->index];
        char q[96], fld[64];
        tbx_quote_bytes(q, sizeof q, t->name, t->name_len, 64);
        /* n_dims > 4 is reported by every validation (the GGUF specification's cap), not
         * again here */
        if (t->name_len >= 64) {
            snprintf(fld, sizeof fld, "tensor[%zu].name", i);
            lint(l, TBX_E_LIMIT, ti->info_off, fld,
                 "tensor \"%s\"%s: name of %zu bytes, ggml allows at most 63", q, shard,
                 (size_t)t->name_len);
        }
        if (ti->max_ne > (uint64_t)INT64_MAX || ti->nelems > (uint64_t)INT64_MAX) {
            snprintf(fld, sizeof fld, "tensor[%zu].ne", i);
            lint(l, TBX_E_OVERFLOW, ti->ne_off, fld,
                 "tensor \"%s\"%s: ne or the element count reaches 2^63, ggml reads them as "
                 "int64", q, shard);
        }
        if (ti->rel != expect) {
            snprintf(fld, sizeof fld, "tensor[%zu].offset", i);
            lint(l, TBX_E_RANGE, ti->off_off, fld,
                 "tensor \"%s\"%s: offset %" PRIu64 ", ggml expects %" PRIu64 " (tensors packed "
                 "in info order, each padded to the alignment %" PRIu64 ")", q, shard, ti->rel,
                 expect, s->alignment);
        }
        uint64_t padded;
        if (!tbx_align_up_u64(ti->size, s->alignment, &padded) ||
            !tbx_add_u64(expect, padded, &expect))
            expect = UINT64_MAX;
    }
}

/* llama.cpp's loader takes the vocabulary's size from tokenizer.ggml.tokens and then requires
 * token_embd.weight (and output.weight, when present) to be [embedding_length, that many]
 * exactly (llama_model_loader::check_tensor_dims): a token count that differs from their rows
 * (ne[1]) makes it refuse the file. */
static void lint_vocab(gguf_lint_ctx *l, tbx_file *f, const gguf_state *s) {
    static const char TOKENS[] = "tokenizer.ggml.tokens";
    for (size_t i = 0; i < f->nmeta; i++) {
        if (f->meta[i].key_len != sizeof TOKENS - 1 ||
            memcmp(f->meta[i].key, TOKENS, sizeof TOKENS - 1) != 0)
            continue;
        const tbx_value *v = f->meta[i].value;
        if (!v || v->type != TBX_V_ARRAY) return;
        const uint64_t ntok = tbx_value_len(v);
        static const char *const EMB[2] = {"token_embd.weight", "output.weight"};
        for (int k = 0; k < 2; k++) {
            uint64_t ti;
            if (tbx_tensor_find(f, EMB[k], &ti) != TBX_OK) continue;
            const tbx_tensor *t = &f->tensors[ti];
            const uint64_t rows = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
            if (rows != ntok)
                lint(l, TBX_E_FORMAT, i < s->nkv ? s->kv_off[i] : TBX_NO_OFFSET, TOKENS,
                     "%s has %" PRIu64 " tokens but tensor \"%s\" has %" PRIu64 " rows (ne[1]):"
                     " llama.cpp loads one token per row and refuses the file", TOKENS, ntok,
                     EMB[k], rows);
        }
        return;
    }
}

tbx_status tbx_gguf_lint(tbx_file *f, tbx_problem_fn cb, void *ud) {
    if (!f || !f->drv || f->drv->format != TBX_FORMAT_GGUF || !f->drv_state)
        return TBX_E_INVALID_ARG;
    const gguf_state *s = f->drv_state;
    if (s->tag != G_STATE_TAG) return TBX_E_INVALID_ARG;
    gguf_lint_ctx l = { cb, ud, TBX_OK };
    char shard[48] = "";
    if (s->split_count > 1) snprintf(shard, sizeof shard, " (shard 1 of %" PRIu32 ")", s->split_count);
    lint_head(&l, s, shard);
    for (size_t i = 0; i < f->nmeta; i++) {
        if (!has_nested_array(f->meta[i].value)) continue;
        char q[96];
        tbx_quote_bytes(q, sizeof q, f->meta[i].key, f->meta[i].key_len, 64);
        lint(&l, TBX_E_UNSUPPORTED, i < s->nkv ? s->kv_off[i] : TBX_NO_OFFSET, "metadata",
             "metadata \"%s\": ggml rejects arrays of arrays", q);
    }
    lint_vocab(&l, f, s);
    lint_tensors(&l, f, s, shard);
    for (size_t k = 0; k < s->nshards; k++) {
        snprintf(shard, sizeof shard, " (shard %zu of %" PRIu32 ")", k + 2, s->split_count);
        lint_head(&l, &s->shards[k], shard);
        lint_tensors(&l, f, &s->shards[k], shard);
    }
    return l.first;
}
