/*
 * llama_quant.c - llama.cpp's quantization rules as data and a small engine over them:
 * llama-quantize's presets (Q4_K_M, IQ2_M, ...: a llama_ftype and its default ggml type), the
 * type each tensor of a model gets under one (the rules of llama.cpp's src/llama-quant.cpp, in
 * the release tensorbox is tested against), the fallback for rows a block type cannot take,
 * and general.file_type.
 *
 * The rules, as tensorbox implements them (each checked against llama_model_quantize by
 * tests/python/test_llama_presets.py):
 *   - never quantized: tensors of fewer than 2 dimensions (after dropping trailing 1s, as ggml
 *     counts them), names not ending in "weight", norms ("_norm.weight"), MoE routers, position
 *     embeddings and token types, small special tensors (conv1d, RWKV's time_mix_*, T5's
 *     relative bias, multimodal position/patch tensors, ...: the name fragments below);
 *   - a --tensor-type rule (first match wins) replaces the preset's choice; --pure gives every
 *     quantized tensor the preset's default type; --output-tensor-type and
 *     --token-embedding-type name the type of output.weight and token_embd.weight outright;
 *   - otherwise the preset's mix: output.weight (and token_embd.weight when the model has no
 *     output.weight: tied embeddings) q6_K, unless its rows need q8_0 or the preset is an
 *     IQ1/IQ2 one (q5_K) or MXFP4_MOE (q8_0); attention V gets more bits in the first and last
 *     layers (Q4_K_M, Q5_K_M: "use_more_bits"), ffn_down likewise by layer position; the
 *     grouped-query (n_gqa >= 4), 8-expert and 70B cases; the IQ presets' own choices;
 *   - then the fallback for rows the type's block does not divide (q4_K -> q5_0, ..., IQ
 *     types -> iq4_nl, and f16 when that does not fit either).
 * Counters advance in llama.cpp's tensor order (blk.N by layer number, then by name), which
 * the caller gives.
 */
#include "models.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------------------------ */
/* Presets                                                                                     */
/* ------------------------------------------------------------------------------------------ */
enum { /* llama_ftype values (llama.h) */
    FT_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9,
    FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14,
    FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18, FT_IQ2_XXS = 19,
    FT_IQ2_XS = 20, FT_Q2_K_S = 21, FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24,
    FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30,
    FT_IQ1_M = 31, FT_BF16 = 32, FT_TQ1_0 = 36, FT_TQ2_0 = 37, FT_MXFP4_MOE = 38,
    FT_Q1_0 = 40, FT_Q2_0 = 41
};

/* llama-quantize's type names (tools/quantize/quantize.cpp), aliases included; COPY copies. */
static const tbx_lq_preset presets[] = {
    {"Q1_0", FT_Q1_0, TBX_DT_Q1_0, 0},       {"Q2_0", FT_Q2_0, TBX_DT_Q2_0, 0},
    {"Q4_0", FT_Q4_0, TBX_DT_Q4_0, 0},       {"Q4_1", FT_Q4_1, TBX_DT_Q4_1, 0},
    {"MXFP4_MOE", FT_MXFP4_MOE, TBX_DT_MXFP4, 0},
    {"Q5_0", FT_Q5_0, TBX_DT_Q5_0, 0},       {"Q5_1", FT_Q5_1, TBX_DT_Q5_1, 0},
    {"IQ2_XXS", FT_IQ2_XXS, TBX_DT_IQ2_XXS, 0}, {"IQ2_XS", FT_IQ2_XS, TBX_DT_IQ2_XS, 0},
    {"IQ2_S", FT_IQ2_S, TBX_DT_IQ2_XS, 0},   {"IQ2_M", FT_IQ2_M, TBX_DT_IQ2_S, 0},
    {"IQ1_S", FT_IQ1_S, TBX_DT_IQ1_S, 0},    {"IQ1_M", FT_IQ1_M, TBX_DT_IQ1_M, 0},
    {"TQ1_0", FT_TQ1_0, TBX_DT_TQ1_0, 0},    {"TQ2_0", FT_TQ2_0, TBX_DT_TQ2_0, 0},
    {"Q2_K", FT_Q2_K, TBX_DT_Q2_K, 0},       {"Q2_K_S", FT_Q2_K_S, TBX_DT_Q2_K, 0},
    {"IQ3_XXS", FT_IQ3_XXS, TBX_DT_IQ3_XXS, 0}, {"IQ3_S", FT_IQ3_S, TBX_DT_IQ3_S, 0},
    {"IQ3_M", FT_IQ3_M, TBX_DT_IQ3_S, 0},    {"Q3_K", FT_Q3_K_M, TBX_DT_Q3_K, 1},
    {"IQ3_XS", FT_IQ3_XS, TBX_DT_IQ3_S, 0},  {"Q3_K_S", FT_Q3_K_S, TBX_DT_Q3_K, 0},
    {"Q3_K_M", FT_Q3_K_M, TBX_DT_Q3_K, 0},   {"Q3_K_L", FT_Q3_K_L, TBX_DT_Q3_K, 0},
    {"IQ4_NL", FT_IQ4_NL, TBX_DT_IQ4_NL, 0}, {"IQ4_XS", FT_IQ4_XS, TBX_DT_IQ4_XS, 0},
    {"Q4_K", FT_Q4_K_M, TBX_DT_Q4_K, 1},     {"Q4_K_S", FT_Q4_K_S, TBX_DT_Q4_K, 0},
    {"Q4_K_M", FT_Q4_K_M, TBX_DT_Q4_K, 0},   {"Q5_K", FT_Q5_K_M, TBX_DT_Q5_K, 1},
    {"Q5_K_S", FT_Q5_K_S, TBX_DT_Q5_K, 0},   {"Q5_K_M", FT_Q5_K_M, TBX_DT_Q5_K, 0},
    {"Q6_K", FT_Q6_K, TBX_DT_Q6_K, 0},       {"Q8_0", FT_Q8_0, TBX_DT_Q8_0, 0},
    {"F16", FT_F16, TBX_DT_F16, 0},          {"BF16", FT_BF16, TBX_DT_BF16, 0},
    {"F32", FT_F32, TBX_DT_F32, 0},          {"COPY", FT_F32, TBX_DT_INVALID, 0},
};

const tbx_lq_preset *tbx_lq_preset_at(size_t i) {
    return i < sizeof presets / sizeof presets[0] ? &presets[i] : NULL;
}

const tbx_lq_preset *tbx_lq_preset_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const char *a = presets[i].name, *b = name;
        while (*a && *b && toupper((unsigned char)*a) == toupper((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return &presets[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Fallback and file type                                                                      */
/* ------------------------------------------------------------------------------------------ */
static uint64_t block_of(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_core_get(dt);
    return di && di->block_size ? di->block_size : 1;
}

static bool is_block(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_core_get(dt);
    return di && (di->flags & TBX_DTF_BLOCK) && di->block_size > 1;
}

/* The fallback of `want` for rows of `cols` values: want itself when they fit; TBX_DT_INVALID
 * when a type of a block larger than 32 has none. */
static tbx_dtype fallback(tbx_dtype want, uint64_t cols) {
    const uint64_t bs = block_of(want);
    if (cols > 0 && cols % bs == 0) return want;
    tbx_dtype fb;
    switch (want) {
    case TBX_DT_IQ1_S: case TBX_DT_IQ1_M: case TBX_DT_IQ2_XXS: case TBX_DT_IQ2_XS:
    case TBX_DT_IQ2_S: case TBX_DT_IQ3_XXS: case TBX_DT_IQ3_S: case TBX_DT_IQ4_XS:
        fb = TBX_DT_IQ4_NL; break;
    case TBX_DT_Q2_0: case TBX_DT_Q2_K: case TBX_DT_Q3_K: case TBX_DT_TQ1_0: case TBX_DT_TQ2_0:
        fb = TBX_DT_Q4_0; break;
    case TBX_DT_Q4_K: fb = TBX_DT_Q5_0; break;
    case TBX_DT_Q5_K: fb = TBX_DT_Q5_1; break;
    case TBX_DT_Q6_K: fb = TBX_DT_Q8_0; break;
    default:
        if (bs > 32) return TBX_DT_INVALID; /* llama.cpp has none either (it stops) */
        fb = want; /* a 32-block type: nothing smaller to demote to */
        break;
    }
    if (cols == 0 || cols % block_of(fb) != 0) return TBX_DT_F16; /* "must use F16" */
    return fb;
}

tbx_dtype tbx_ggml_quant_fallback(tbx_dtype want, uint64_t cols) {
    if (!is_block(want)) return TBX_DT_INVALID;
    const tbx_dtype fb = fallback(want, cols);
    return fb == TBX_DT_INVALID ? TBX_DT_F16 : fb;
}

/* llama.cpp's file type (enum llama_ftype in llama.h, gguf-py's LlamaFileType) of a model whose
 * bulk type is `bulk`: the value convert_hf_to_gguf.py and llama-quantize write to
 * general.file_type ("mostly X": 1-D tensors stay f32), and the one llama.cpp's loader guesses
 * when the key is missing (the K types as their _M mixes). Others: 1024, LLAMA_FTYPE_GUESSED. */
uint32_t tbx_llama_ftype(tbx_dtype bulk) {
    switch (bulk) {
    case TBX_DT_F32: return FT_F32;
    case TBX_DT_F16: return FT_F16;
    case TBX_DT_Q4_0: return FT_Q4_0;
    case TBX_DT_Q4_1: return FT_Q4_1;
    case TBX_DT_Q8_0: return FT_Q8_0;
    case TBX_DT_Q5_0: return FT_Q5_0;
    case TBX_DT_Q5_1: return FT_Q5_1;
    case TBX_DT_Q2_K: return FT_Q2_K;
    case TBX_DT_Q3_K: return FT_Q3_K_M;
    case TBX_DT_Q4_K: return FT_Q4_K_M;
    case TBX_DT_Q5_K: return FT_Q5_K_M;
    case TBX_DT_Q6_K: return FT_Q6_K;
    case TBX_DT_IQ2_XXS: return FT_IQ2_XXS;
    case TBX_DT_IQ2_XS: return FT_IQ2_XS;
    case TBX_DT_IQ3_XXS: return FT_IQ3_XXS;
    case TBX_DT_IQ1_S: return FT_IQ1_S;
    case TBX_DT_IQ4_NL: return FT_IQ4_NL;
    case TBX_DT_IQ3_S: return FT_IQ3_S;
    case TBX_DT_IQ2_S: return FT_IQ2_S;
    case TBX_DT_IQ4_XS: return FT_IQ4_XS;
    case TBX_DT_IQ1_M: return FT_IQ1_M;
    case TBX_DT_BF16: return FT_BF16;
    case TBX_DT_TQ1_0: return FT_TQ1_0;
    case TBX_DT_TQ2_0: return FT_TQ2_0;
    case TBX_DT_MXFP4: return FT_MXFP4_MOE;
    case TBX_DT_NVFP4: return 39;
    case TBX_DT_Q1_0: return FT_Q1_0;
    case TBX_DT_Q2_0: return FT_Q2_0;
    default: return 1024;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tensor names                                                                                */
/* ------------------------------------------------------------------------------------------ */
enum cat { C_OTHER, C_TOKEN_EMBD, C_ATTN_Q, C_ATTN_V, C_ATTN_K, C_ATTN_QKV, C_ATTN_KV_B,
           C_ATTN_OUT, C_FFN_UP, C_FFN_GATE, C_FFN_DOWN, C_OUTPUT };

static bool has(const char *name, const char *frag) { return strstr(name, frag) != NULL; }

static bool is_token_embd(const char *n) {
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}

static enum cat category(const char *n) {
    if (!strcmp(n, "output.weight")) return C_OUTPUT;
    if (is_token_embd(n)) return C_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return C_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return C_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return C_ATTN_V;
    if (has(n, "attn_k.weight")) return C_ATTN_K;
    if (has(n, "attn_q.weight")) return C_ATTN_Q;
    if (has(n, "attn_output.weight")) return C_ATTN_OUT;
    if (has(n, "ffn_up")) return C_FFN_UP;
    if (has(n, "ffn_gate")) return C_FFN_GATE;
    if (has(n, "ffn_down")) return C_FFN_DOWN;
    return C_OTHER;
}

static bool attn_v_like(enum cat c) { return c == C_ATTN_V || c == C_ATTN_QKV || c == C_ATTN_KV_B; }

/* Name fragments that keep a 2-D+ "weight" as it is (small or special tensors). */
static const char *const never_frags[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
    "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
    "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
    "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
    ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
/* and for glm5-next */
static const char *const never_glm5_next[] = {
    "hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
    "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight",
    "ssm_g_b.weight", "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight",
    "attn_v_b.weight"};

static bool arch_is(const tbx_lq_model *m, const char *a) { return m->arch && !strcmp(m->arch, a); }

bool tbx_lq_quantizable(const tbx_lq_model *m, const tbx_lq_params *p, const tbx_lq_tensor *t) {
    if (p->only_copy || t->ndim < 2) return false;
    const char *n = t->name;
    const size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight") != 0) return false;
    if (!p->quantize_output && !strcmp(n, "output.weight")) return false;
    for (size_t i = 0; i < sizeof never_frags / sizeof never_frags[0]; i++)
        if (has(n, never_frags[i])) return false;
    if (arch_is(m, "glm5-next"))
        for (size_t i = 0; i < sizeof never_glm5_next / sizeof never_glm5_next[0]; i++)
            if (has(n, never_glm5_next[i])) return false;
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) return false;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The mix                                                                                     */
/* ------------------------------------------------------------------------------------------ */
typedef struct state {
    const tbx_lq_model *m;
    const tbx_lq_params *p;
    int n_attn_v, i_attn_v, n_ffn, i_ffn_down, i_ffn_gate, i_ffn_up;
    bool tied; /* no output.weight: token_embd serves as the output too */
} state;

static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The layer of an FFN tensor: its own counter, or (MoE) the number in its name. */
static tbx_status layer_of(const state *s, int counter, const char *name, int *out,
                           tbx_error *err) {
    *out = counter;
    if ((s->m->n_expert > 1 ? s->m->n_expert : 1) <= 1) return TBX_OK;
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, name,
                       "tensor \"%s\": no layer number in its name (blk.N.), which an expert "
                       "model's quantization mix needs", name);
    if (l < 0 || l >= s->n_ffn)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, name,
                       "tensor \"%s\": layer %d is outside the model's %d layers", name, l,
                       s->n_ffn);
    *out = l;
    return TBX_OK;
}

static bool ft_in(uint32_t f, const uint32_t *set, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == f) return true;
    return false;
}
#define FT_IN(f, ...) ft_in((f), (const uint32_t[]){__VA_ARGS__}, \
                            sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))

static tbx_status mix(state *s, tbx_dtype *type, const tbx_lq_tensor *t, enum cat c,
                      tbx_error *err) {
    const tbx_lq_model *m = s->m;
    const uint32_t ft = s->p->ftype;
    const bool falcon = arch_is(m, "falcon");
    const uint32_t gqa = m->n_head_kv ? m->n_head / m->n_head_kv : 0;
    const uint32_t nx = m->n_expert;
    const bool x8 = nx == 8;
    tbx_dtype nt = *type;
    const char *name = t->name;
    int il = 0;
    tbx_status st = TBX_OK;

    if (arch_is(m, "glm5-next") &&
        (has(name, "attn_q_a") || has(name, "attn_q_b") || has(name, "nextn.eh_proj")) &&
        nt != TBX_DT_F32 && nt != TBX_DT_BF16 && nt != TBX_DT_F16) {
        *type = TBX_DT_Q8_0;
        return TBX_OK;
    }
    if (c == C_OUTPUT || (s->tied && c == C_TOKEN_EMBD)) {
        if (s->p->output_type != TBX_DT_INVALID) {
            nt = s->p->output_type;
        } else if (ft == FT_MXFP4_MOE) {
            nt = TBX_DT_Q8_0;
        } else if (falcon || t->ne[0] % block_of(nt) != 0) {
            nt = TBX_DT_Q8_0;
        } else if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ3_XXS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M,
                         FT_IQ1_M)) {
            nt = TBX_DT_Q5_K;
        } else if (nt != TBX_DT_Q8_0) {
            nt = TBX_DT_Q6_K;
        }
    } else if (ft == FT_MXFP4_MOE) {
        /* experts (3-D) mxfp4, the rest q8_0; bailingmoe3's 3-D MLA projections stay q8_0 */
        const bool bm3 = arch_is(m, "bailingmoe3");
        const bool expert = c == C_FFN_UP || c == C_FFN_GATE || c == C_FFN_DOWN;
        nt = t->ne[2] > 1 && (!bm3 || expert) ? TBX_DT_MXFP4 : TBX_DT_Q8_0;
    } else if (c == C_TOKEN_EMBD) {
        if (s->p->token_embd_type != TBX_DT_INVALID) nt = s->p->token_embd_type;
        else if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ1_M)) nt = TBX_DT_Q2_K;
        else if (FT_IN(ft, FT_IQ2_S, FT_IQ2_M, FT_IQ3_XXS)) nt = TBX_DT_IQ3_S;
        else if (FT_IN(ft, FT_TQ1_0, FT_TQ2_0, FT_Q2_0)) nt = TBX_DT_Q4_K;
    } else if (FT_IN(ft, FT_IQ2_XXS, FT_IQ2_XS, FT_IQ1_S, FT_IQ2_S, FT_IQ2_M, FT_IQ1_M)) {
        const bool s_or_m = ft == FT_IQ2_S || ft == FT_IQ2_M;
        if (attn_v_like(c)) {
            if (gqa >= 4 || nx >= 4) nt = TBX_DT_Q4_K;
            else nt = s_or_m ? TBX_DT_IQ3_S : TBX_DT_Q2_K;
            s->i_attn_v++;
        } else if (x8 && c == C_ATTN_K) {
            nt = TBX_DT_Q4_K;
        } else if (c == C_FFN_DOWN) {
            if (s->i_ffn_down < s->n_ffn / 8) nt = s_or_m ? TBX_DT_IQ3_S : TBX_DT_Q2_K;
            s->i_ffn_down++;
        } else if (c == C_ATTN_OUT) {
            if (x8) nt = TBX_DT_Q5_K;
            else if (ft == FT_IQ1_S || ft == FT_IQ1_M) nt = TBX_DT_IQ2_XXS;
            else if (s_or_m) nt = TBX_DT_IQ3_S;
        }
    } else if (attn_v_like(c)) {
        if (ft == FT_Q2_K) nt = gqa >= 4 ? TBX_DT_Q4_K : TBX_DT_Q3_K;
        else if (ft == FT_Q2_K_S && gqa >= 4) nt = TBX_DT_Q4_K;
        else if (ft == FT_IQ3_XXS)
            nt = gqa >= 4 ? TBX_DT_Q4_K : !s->p->has_imatrix ? TBX_DT_IQ3_S : TBX_DT_IQ3_XXS;
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && gqa >= 4) nt = TBX_DT_Q4_K;
        else if (ft == FT_IQ3_M) nt = TBX_DT_Q4_K;
        else if (ft == FT_Q3_K_M) nt = s->i_attn_v < 2 ? TBX_DT_Q5_K : TBX_DT_Q4_K;
        else if (ft == FT_Q3_K_L) nt = TBX_DT_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && gqa >= 4) nt = TBX_DT_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && more_bits(s->i_attn_v, s->n_attn_v))
            nt = TBX_DT_Q6_K;
        else if (ft == FT_Q4_K_S && s->i_attn_v < 4) nt = TBX_DT_Q5_K;
        if (m->is_70b && (nt == TBX_DT_Q3_K || nt == TBX_DT_Q4_K)) nt = TBX_DT_Q5_K;
        if (x8) nt = TBX_DT_Q8_0;
        s->i_attn_v++;
    } else if (c == C_ATTN_K) {
        if (x8) nt = TBX_DT_Q8_0;
        else if (ft == FT_IQ3_XS) nt = TBX_DT_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = TBX_DT_IQ2_S;
    } else if (c == C_ATTN_Q) {
        if (ft == FT_IQ3_XS) nt = TBX_DT_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = TBX_DT_IQ2_S;
    } else if (c == C_FFN_DOWN) {
        if ((st = layer_of(s, s->i_ffn_down, name, &il, err)) != TBX_OK) return st;
        const int nl = s->n_ffn;
        if (ft == FT_Q2_K) nt = TBX_DT_Q3_K;
        else if (ft == FT_Q2_K_S) { if (il < nl / 8) nt = TBX_DT_Q4_K; }
        else if (ft == FT_IQ3_XXS && !s->p->has_imatrix)
            nt = il < nl / 8 ? TBX_DT_Q4_K : TBX_DT_Q3_K;
        else if (ft == FT_Q3_K_M)
            nt = il < nl / 16 ? TBX_DT_Q5_K
                 : !falcon || more_bits(il, nl) ? TBX_DT_Q4_K : TBX_DT_Q3_K;
        else if (ft == FT_IQ3_M && (il < nl / 8 || (x8 && more_bits(il, nl)))) nt = TBX_DT_Q4_K;
        else if (ft == FT_Q3_K_L) nt = falcon ? TBX_DT_Q4_K : TBX_DT_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (falcon)
                nt = il < nl / 16 ? TBX_DT_Q6_K : more_bits(il, nl) ? TBX_DT_Q5_K : TBX_DT_Q4_K;
            else if (more_bits(il, nl)) nt = TBX_DT_Q6_K;
        } else if (il < nl / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !s->p->has_imatrix)
            nt = TBX_DT_Q5_K;
        else if (ft == FT_Q5_K_M && more_bits(il, nl)) nt = TBX_DT_Q6_K;
        else if (ft == FT_Q4_K_S && !falcon && il < nl / 8) nt = TBX_DT_Q5_K;
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && s->p->has_imatrix && il < nl / 8)
            nt = ft == FT_Q4_0 ? TBX_DT_Q4_1 : TBX_DT_Q5_1;
        s->i_ffn_down++;
    } else if (c == C_ATTN_OUT) {
        if (!falcon) {
            if (x8) {
                if (FT_IN(ft, FT_Q2_K, FT_IQ3_XS, FT_IQ3_XXS, FT_Q3_K_S, FT_Q3_K_M, FT_IQ4_NL,
                          FT_Q4_K_S, FT_Q4_K_M, FT_IQ3_S, FT_IQ3_M, FT_IQ4_XS))
                    nt = TBX_DT_Q5_K;
            } else {
                if (ft == FT_Q2_K) nt = TBX_DT_Q3_K;
                else if (ft == FT_IQ3_XXS) nt = TBX_DT_IQ3_S;
                else if (ft == FT_Q3_K_M) nt = TBX_DT_Q4_K;
                else if (ft == FT_Q3_K_L) nt = TBX_DT_Q5_K;
                else if (ft == FT_IQ3_M) nt = TBX_DT_Q4_K;
            }
        } else if (ft == FT_Q3_K_L) {
            nt = TBX_DT_Q4_K;
        }
    } else if (c == C_FFN_GATE || c == C_FFN_UP) {
        int *ctr = c == C_FFN_GATE ? &s->i_ffn_gate : &s->i_ffn_up;
        if ((st = layer_of(s, *ctr, name, &il, err)) != TBX_OK) return st;
        const int nl = s->n_ffn;
        if (ft == FT_IQ3_XS && il >= nl / 8 && il < 7 * nl / 8) nt = TBX_DT_IQ3_XXS;
        (*ctr)++;
    }
    *type = nt;
    return TBX_OK;
}

tbx_status tbx_lq_types(const tbx_lq_model *m, const tbx_lq_params *p, const tbx_lq_tensor *t,
                        size_t n, tbx_lq_choice *out, tbx_error *err) {
    state s;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.p = p;
    s.tied = true;
    for (size_t i = 0; i < n; i++) {
        const enum cat c = category(t[i].name);
        if (attn_v_like(c)) s.n_attn_v++;
        if (c == C_OUTPUT) s.tied = false;
    }
    s.n_ffn = (int)(m->n_layer > INT32_MAX ? INT32_MAX : m->n_layer);
    const bool quantized_default = is_block(p->deflt);
    for (size_t i = 0; i < n; i++) {
        const tbx_lq_tensor *ti = &t[i];
        tbx_lq_choice *o = &out[i];
        o->type = ti->type;
        o->why = TBX_LQ_KEPT;
        o->requires_imatrix = false;
        if (!tbx_lq_quantizable(m, p, ti)) continue;
        const enum cat c = category(ti->name);
        tbx_dtype nt = p->deflt;
        o->why = TBX_LQ_PRESET;
        if (p->token_embd_type != TBX_DT_INVALID && c == C_TOKEN_EMBD) {
            /* per_layer_token_embd may still be named by a --tensor-type rule */
            bool named = false;
            if (!strcmp(ti->name, "per_layer_token_embd.weight"))
                for (size_t r = 0; r < p->nrules && !named; r++)
                    named = p->rule_match(p->rule_ud, r, ti->name);
            if (!named) {
                o->type = p->token_embd_type;
                o->why = TBX_LQ_OPTION;
                goto imatrix;
            }
        }
        if (p->output_type != TBX_DT_INVALID && c == C_OUTPUT) {
            o->type = p->output_type;
            o->why = TBX_LQ_OPTION;
            goto imatrix;
        }
        if (quantized_default) {
            bool manual = false;
            for (size_t r = 0; r < p->nrules && !manual; r++)
                if (p->rule_match(p->rule_ud, r, ti->name)) {
                    nt = p->rule_types[r];
                    manual = true;
                    o->why = TBX_LQ_RULE;
                    o->rule = (uint32_t)r;
                }
            if (!manual && !p->pure) {
                tbx_status st = mix(&s, &nt, ti, c, err);
                if (st != TBX_OK) return st;
            }
            const tbx_dtype fb = fallback(nt, (uint64_t)ti->ne[0]);
            if (fb == TBX_DT_INVALID) {
                const tbx_dtype_info *di = tbx_dtype_get(nt);
                return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, ti->name,
                               "tensor \"%s\": rows of %lld values do not fit %s's blocks of "
                               "%llu, and llama.cpp defines no fallback type for it",
                               ti->name, (long long)ti->ne[0], di ? di->name : "?",
                               (unsigned long long)block_of(nt));
            }
            if (fb != nt) {
                o->why = TBX_LQ_FALLBACK;
                o->wanted = nt;
            }
            nt = fb;
        }
        o->type = nt;
    imatrix:
        /* the IQ1/IQ2/IQ3_XXS types (and Q2_K in a Q2_K_S file) need an importance matrix,
         * except for the embeddings and the output */
        if (!is_token_embd(ti->name) && strcmp(ti->name, "output.weight") != 0) {
            switch (o->type) {
            case TBX_DT_IQ3_XXS: case TBX_DT_IQ2_XXS: case TBX_DT_IQ2_XS: case TBX_DT_IQ2_S:
            case TBX_DT_IQ1_M: case TBX_DT_IQ1_S:
                o->requires_imatrix = true; break;
            case TBX_DT_Q2_K: o->requires_imatrix = p->ftype == FT_Q2_K_S; break;
            default: break;
            }
        }
    }
    return TBX_OK;
}

/* llama.cpp's tensor order (its loader's weights map): blk.N tensors by N, the others (N = -1)
 * first, then by name (bytes as unsigned). */
int tbx_lq_name_cmp(const char *a, const char *b) {
    int la = -1, lb = -1;
    if (sscanf(a, "blk.%d.", &la) != 1) la = -1;
    if (sscanf(b, "blk.%d.", &lb) != 1) lb = -1;
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

/* ------------------------------------------------------------------------------------------ */
/* --tensor-type rules                                                                         */
/* ------------------------------------------------------------------------------------------ */
/* A type llama-quantize's --tensor-type takes and tensorbox writes to GGUF: f32, f16, bf16 or
 * a ggml block type. */
static bool ggml_target(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    if (!di) return false;
    return dt == TBX_DT_F32 || dt == TBX_DT_F16 || dt == TBX_DT_BF16 ||
           (dt >= TBX_DT_Q4_0 && dt <= TBX_DT_Q2_0 && (di->flags & TBX_DTF_BLOCK));
}

/* The compiled --tensor-type rules. */
struct tbx_lq_rules {
    regex_t *re;
    size_t n;
    tbx_dtype *types;
};
typedef struct tbx_lq_rules rules;

static bool rule_match(void *ud, size_t r, const char *name) {
    const rules *rs = ud;
    return regexec(&rs->re[r], name, 0, NULL, 0) == 0;
}

static void rules_free(rules *rs) {
    for (size_t i = 0; i < rs->n; i++) regfree(&rs->re[i]);
    free(rs->re);
    free(rs->types);
    memset(rs, 0, sizeof *rs);
}

/* The pattern as POSIX extended syntax: lower-cased (llama-quantize lower-cases it), with the
 * ECMAScript classes \d \w \s (and \D \W \S) written out. NULL when out of memory. */
static char *ere_of(const char *pat) {
    const size_t n = strlen(pat);
    char *o = malloc(n * 12 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = pat[i];
        if (c == '\\' && i + 1 < n && strchr("dwsDWS", pat[i + 1])) {
            const char *cls = NULL;
            switch (pat[i + 1]) {
            case 'd': cls = "[0-9]"; break;
            case 'D': cls = "[^0-9]"; break;
            case 'w': cls = "[a-z0-9_]"; break;
            case 'W': cls = "[^a-z0-9_]"; break;
            case 's': cls = "[[:space:]]"; break;
            default: cls = "[^[:space:]]"; break;
            }
            memcpy(o + k, cls, strlen(cls));
            k += strlen(cls);
            i++;
            continue;
        }
        if (c == '\\' && i + 1 < n) { /* an escape: kept with its character */
            o[k++] = c;
            o[k++] = pat[++i];
            continue;
        }
        o[k++] = (char)tolower((unsigned char)c);
    }
    o[k] = 0;
    return o;
}

tbx_status tbx_lq_rules_compile(const tbx_tensor_type_rule *tr, size_t ntr, tbx_lq_rules **out,
                                tbx_error *err) {
    rules *rs = calloc(1, sizeof *rs);
    if (!rs) return tbx_err_nomem(err, "tensor type rules");
    if (ntr) {
        rs->re = calloc(ntr, sizeof *rs->re);
        rs->types = calloc(ntr, sizeof *rs->types);
        if (!rs->re || !rs->types) {
            rules_free(rs);
            free(rs);
            return tbx_err_nomem(err, "tensor type rules");
        }
    }
    for (size_t i = 0; i < ntr; i++) {
        const tbx_tensor_type_rule *r = &tr[i];
        const tbx_dtype_info *di = tbx_dtype_get(r->type);
        char field[48];
        snprintf(field, sizeof field, "tensor_types[%zu]", i);
        tbx_status st = TBX_OK;
        if (!r->pattern || !*r->pattern)
            st = tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                         "--tensor-type rule %zu has no pattern (PATTERN=TYPE)", i + 1);
        else if (!ggml_target(r->type))
            st = tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                         "--tensor-type %s: %s is not a ggml type", r->pattern,
                         di ? di->name : "(none)");
        char *ere = st == TBX_OK ? ere_of(r->pattern) : NULL;
        if (st == TBX_OK && !ere) st = tbx_err_nomem(err, "tensor type rules");
        if (st == TBX_OK) {
            const int rc = regcomp(&rs->re[i], ere, REG_EXTENDED | REG_NOSUB);
            if (rc != 0) {
                char msg[128];
                regerror(rc, &rs->re[i], msg, sizeof msg);
                st = tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, field,
                             "--tensor-type %s: the pattern is not a regular expression (%s)",
                             r->pattern, msg);
            } else {
                rs->n = i + 1;
                rs->types[i] = r->type;
            }
        }
        free(ere);
        if (st != TBX_OK) {
            rules_free(rs);
            free(rs);
            return st;
        }
    }
    if (out) *out = rs;
    else {
        rules_free(rs);
        free(rs);
    }
    return TBX_OK;
}

void tbx_lq_rules_free(tbx_lq_rules *r) {
    if (!r) return;
    rules_free(r);
    free(r);
}

void tbx_lq_rules_use(tbx_lq_rules *r, tbx_lq_params *p) {
    p->nrules = r ? r->n : 0;
    p->rule_types = r ? r->types : NULL;
    p->rule_match = rule_match;
    p->rule_ud = r;
}


void tbx_lq_model_finish(tbx_lq_model *m) {
    const char *a = m->arch ? m->arch : "";
    m->is_70b = (!strcmp(a, "llama") && m->n_layer == 80 && m->n_head != m->n_head_kv &&
                 m->n_expert != 8) ||
                ((!strcmp(a, "qwen2") || !strcmp(a, "deci") || !strcmp(a, "olmo")) &&
                 m->n_layer == 80) ||
                (!strcmp(a, "jais2") && m->n_layer == 68);
}

/* ------------------------------------------------------------------------------------------ */
/* llama.cpp's architectures                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* The general.architecture values llama.cpp's loader knows (its LLM_ARCH names, in the release
 * tested against; the vision encoder "clip" left out), sorted for bsearch. A file naming one of
 * them is a model llama-quantize's presets apply to. */
static const char *const llama_archs[] = {
    "afmoe", "apertus", "arcee", "arctic", "arwkv7", "baichuan", "bailingmoe", "bailingmoe2",
    "bailingmoe3", "bert", "bitnet", "bloom", "chameleon", "chatglm", "codeshell", "cogvlm",
    "cohere2", "cohere2moe", "command-r", "dbrx", "deci", "deepseek", "deepseek2",
    "deepseek2-ocr", "deepseek32", "deepseek4", "dflash", "dots1", "dots3note", "dream",
    "eagle3", "ernie4_5", "ernie4_5-moe", "eurobert", "exaone", "exaone-moe", "exaone4",
    "falcon", "falcon-h1", "gemma", "gemma-embedding", "gemma2", "gemma3", "gemma3n", "gemma4",
    "gemma4-assistant", "glm-dsa", "glm4", "glm4moe", "glm5-next", "gpt-oss", "gpt2", "gptj",
    "gptneox", "granite", "granite_swa", "granitehybrid", "granitemoe", "graniteswitch", "grok",
    "grovemoe", "hrm_text", "hunyuan-dense", "hunyuan-moe", "hunyuan_vl", "hy_v3", "hy_v4",
    "internlm2", "jais", "jais2", "jamba", "jina-bert-v2", "jina-bert-v3", "kimi-k3",
    "kimi-linear", "laguna", "lfm2", "lfm2moe", "llada", "llada-moe", "llama", "llama-embed",
    "llama4", "maincoder", "mamba", "mamba2", "maple", "mellum", "mimo2", "minicpm", "minicpm3",
    "minimax-01", "minimax-m2", "minimax-m3", "mistral3", "mistral4", "modern-bert", "mpt",
    "muse-glimmer", "nanbeige", "nemotron", "nemotron_h", "nemotron_h_moe", "neo-bert",
    "nomic-bert", "nomic-bert-moe", "olmo", "olmo2", "olmoe", "openelm", "orion", "paddleocr",
    "pangu-embedded", "phi2", "phi3", "phimoe", "plamo", "plamo2", "plamo3", "plm", "pockettts",
    "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen35", "qwen35moe", "qwen3moe",
    "qwen3next", "qwen3tts", "qwen3vl", "qwen3vlmoe", "qwen4exp", "refact", "rnd1", "rwkv6",
    "rwkv6qwen2", "rwkv7", "seed_oss", "smallthinker", "smollm3", "spark2_5", "stablelm",
    "starcoder", "starcoder2", "step35", "t5", "t5encoder", "talkie", "wavtokenizer-dec",
    "xverse",
};

static int arch_cmp(const void *k, const void *e) {
    return strcmp((const char *)k, *(const char *const *)e);
}

bool tbx_lq_arch_known(const char *arch, size_t len) {
    char buf[64];
    if (!arch || len == 0 || len >= sizeof buf || memchr(arch, 0, len)) return false;
    memcpy(buf, arch, len);
    buf[len] = 0;
    return bsearch(buf, llama_archs, sizeof llama_archs / sizeof llama_archs[0],
                   sizeof llama_archs[0], arch_cmp) != NULL;
}
