/*
 * arch_llama_cpp.c - the architecture table: each Hugging Face architecture tensorbox writes
 * for llama.cpp, as one row (arch.h). Adding an architecture that llama.cpp runs is a row here
 * (and, when it needs a hyper-parameter, tokenizer or shape the conversion does not know yet,
 * that piece in hf_gguf.c); every list of supported architectures (tbx convert --help, the
 * unsupported-architecture error, tbx_gguf_hf_arch_at, Python's hf_architectures()) is read
 * from this table.
 *
 * The reference for each row is llama.cpp: its converter convert_hf_to_gguf.py (which HF names
 * become which tensors, the rope_scaling types it writes for the model class, the vocabulary
 * it picks) and the constants of gguf-py (gguf.constants, gguf.tensor_mapping), which
 * tests/python/test_hf_gguf.py checks every output against.
 */
#include "models.h" /* tbx_gguf_hf_arch_* (tensorbox/gguf.h) */
#include "arch.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const hf_hparam HP_BERT[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.layer_norm_epsilon", HP_F32, {"layer_norm_eps"}, true},
    {NULL, HP_U32, {NULL}, false},
};

#define ONE(HF, GG) {HF, GG, HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL}

static const hf_tmap TM_BERT[] = {
    ONE("embeddings.word_embeddings", "token_embd"),
    ONE("embeddings.position_embeddings", "position_embd"),
    ONE("embeddings.token_type_embeddings", "token_types"),
    ONE("embeddings.LayerNorm", "token_embd_norm"),
    ONE("encoder.layer.#.attention.self.query", "blk.#.attn_q"),
    ONE("encoder.layer.#.attention.self.key", "blk.#.attn_k"),
    ONE("encoder.layer.#.attention.self.value", "blk.#.attn_v"),
    ONE("encoder.layer.#.attention.output.dense", "blk.#.attn_output"),
    ONE("encoder.layer.#.attention.output.LayerNorm", "blk.#.attn_output_norm"),
    ONE("encoder.layer.#.intermediate.dense", "blk.#.ffn_up"),
    ONE("encoder.layer.#.output.dense", "blk.#.ffn_down"),
    ONE("encoder.layer.#.output.LayerNorm", "blk.#.layer_output_norm"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const char *const SKIP_BERT[] = {"embeddings.position_ids", "pooler.*", "cls.*", NULL};

static const hf_hparam HP_LLAMA[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {NULL, HP_U32, {NULL}, false},
};

/* Mixtral: llama's, and the experts (convert_hf_to_gguf.py's TextModel writes expert_count and
 * expert_used_count from these fields) */
static const hf_hparam HP_MIXTRAL[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"expert_count", HP_U32, {"num_local_experts"}, true},
    {"expert_used_count", HP_U32, {"num_experts_per_tok"}, true},
    {NULL, HP_U32, {NULL}, false},
};

#define TM_DECODER_ATTN(QX, KX)                                                                \
    ONE("model.embed_tokens", "token_embd"),                                                   \
    ONE("model.norm", "output_norm"),                                                          \
    ONE("lm_head", "output"),                                                                  \
    ONE("model.layers.#.input_layernorm", "blk.#.attn_norm"),                                  \
    {"model.layers.#.self_attn.q_proj", "blk.#.attn_q", HF_MAP_ONE, QX, 0.0f, NULL},           \
    {"model.layers.#.self_attn.k_proj", "blk.#.attn_k", HF_MAP_ONE, KX, 0.0f, NULL},           \
    ONE("model.layers.#.self_attn.v_proj", "blk.#.attn_v"),                                    \
    ONE("model.layers.#.self_attn.o_proj", "blk.#.attn_output"),                               \
    ONE("model.layers.#.post_attention_layernorm", "blk.#.ffn_norm")

#define TM_DENSE_FFN                                                                           \
    ONE("model.layers.#.mlp.gate_proj", "blk.#.ffn_gate"),                                     \
    ONE("model.layers.#.mlp.up_proj", "blk.#.ffn_up"),                                         \
    ONE("model.layers.#.mlp.down_proj", "blk.#.ffn_down")

/* llama.cpp applies llama's rotary embedding to interleaved pairs; HF's checkpoints are laid
 * out for the rotate-half form, so q/k rows are reordered (HF_XF_PERMUTE_*). qwen2 uses the
 * rotate-half (NEOX) form in llama.cpp too: no reordering. */
static const hf_tmap TM_LLAMA[] = {
    TM_DECODER_ATTN(HF_XF_PERMUTE_Q, HF_XF_PERMUTE_K), TM_DENSE_FFN,
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const hf_tmap TM_QWEN2[] = {
    TM_DECODER_ATTN(HF_XF_NONE, HF_XF_NONE), TM_DENSE_FFN,
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* Mixtral's sparse MoE block: the router, and experts 0..n-1 of w1 (gate), w2 (down), w3 (up)
 * each stacked into one [n_expert, rows, cols] tensor, as convert_hf_to_gguf.py's LlamaModel
 * stacks them */
static const hf_tmap TM_MIXTRAL[] = {
    TM_DECODER_ATTN(HF_XF_PERMUTE_Q, HF_XF_PERMUTE_K),
    ONE("model.layers.#.block_sparse_moe.gate", "blk.#.ffn_gate_inp"),
    {"model.layers.#.block_sparse_moe.experts.@.w1", "blk.#.ffn_gate_exps", HF_MAP_STACK,
     HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.block_sparse_moe.experts.@.w2", "blk.#.ffn_down_exps", HF_MAP_STACK,
     HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.block_sparse_moe.experts.@.w3", "blk.#.ffn_up_exps", HF_MAP_STACK,
     HF_XF_NONE, 0.0f, NULL},
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* Baichuan (7B): llama with q, k and v fused in one W_pack [3 x hidden, hidden]; convert_hf_to_gguf
 * .py's BaichuanModel cuts it into thirds and reorders the q and k rows as llama's (its
 * _reverse_hf_permute_part). Here the parts' rows come from the head counts (q: heads x head
 * size, k and v: kv heads x head size), which are the thirds when there is no GQA. Its
 * hyper-parameters: llama's, context from model_max_length when max_position_embeddings is
 * absent, head_count_kv always written (the head count without num_key_value_heads). */
static const hf_hparam HP_BAICHUAN[] = {
    {"context_length", HP_U32, {"max_position_embeddings", "model_max_length"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads", "num_attention_heads"}, true},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_part PARTS_W_PACK[] = {
    {"blk.#.attn_q", HD_Q, HF_XF_PERMUTE_Q, 0.0f},
    {"blk.#.attn_k", HD_K, HF_XF_PERMUTE_K, 0.0f},
    {"blk.#.attn_v", HD_K, HF_XF_NONE, 0.0f},
    {NULL, 0, 0, 0.0f},
};
static const hf_tmap TM_BAICHUAN[] = {
    ONE("model.embed_tokens", "token_embd"),
    ONE("model.norm", "output_norm"),
    ONE("lm_head", "output"),
    ONE("model.layers.#.input_layernorm", "blk.#.attn_norm"),
    {"model.layers.#.self_attn.W_pack", NULL, HF_MAP_SPLIT, HF_XF_NONE, 0.0f, PARTS_W_PACK},
    ONE("model.layers.#.self_attn.o_proj", "blk.#.attn_output"),
    ONE("model.layers.#.post_attention_layernorm", "blk.#.ffn_norm"),
    TM_DENSE_FFN,
    {NULL, NULL, 0, 0, 0.0f, NULL},
};

/* Qwen2-MoE (convert_hf_to_gguf.py's Qwen2MoeModel): qwen2's attention, a router over
 * num_experts experts of moe_intermediate_size stacked per layer, and a shared expert of
 * shared_expert_intermediate_size with its own sigmoid gate ([1, hidden]) */
static const hf_hparam HP_QWEN2MOE[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"expert_count", HP_U32, {"num_experts"}, true},
    {"expert_used_count", HP_U32, {"num_experts_per_tok"}, true},
    {"expert_feed_forward_length", HP_U32, {"moe_intermediate_size"}, false},
    {"expert_shared_feed_forward_length", HP_U32, {"shared_expert_intermediate_size"}, false},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_tmap TM_QWEN2MOE[] = {
    TM_DECODER_ATTN(HF_XF_NONE, HF_XF_NONE),
    ONE("model.layers.#.mlp.gate", "blk.#.ffn_gate_inp"),
    {"model.layers.#.mlp.experts.@.gate_proj", "blk.#.ffn_gate_exps", HF_MAP_STACK, HF_XF_NONE,
     0.0f, NULL},
    {"model.layers.#.mlp.experts.@.up_proj", "blk.#.ffn_up_exps", HF_MAP_STACK, HF_XF_NONE, 0.0f,
     NULL},
    {"model.layers.#.mlp.experts.@.down_proj", "blk.#.ffn_down_exps", HF_MAP_STACK, HF_XF_NONE,
     0.0f, NULL},
    ONE("model.layers.#.mlp.shared_expert.gate_proj", "blk.#.ffn_gate_shexp"),
    ONE("model.layers.#.mlp.shared_expert.up_proj", "blk.#.ffn_up_shexp"),
    ONE("model.layers.#.mlp.shared_expert.down_proj", "blk.#.ffn_down_shexp"),
    ONE("model.layers.#.mlp.shared_expert_gate", "blk.#.ffn_gate_inp_shexp"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};

/* ---- issue 22: qwen3, qwen3_moe, olmo2, granite (and mistral, a llama row) ----------------- */
/* Qwen3 (convert_hf_to_gguf.py's Qwen3Model, a Qwen2Model): qwen2's tensors, and an RMS norm of
 * each head of q and of k before the rotary embedding (self_attn.q_norm / k_norm: [head_dim],
 * gguf-py's ATTN_Q_NORM / ATTN_K_NORM); config.json's head_dim (not hidden / heads in the real
 * models) becomes attention.key_length / value_length as for every row. */
#define TM_QK_NORM                                                                             \
    ONE("model.layers.#.self_attn.q_norm", "blk.#.attn_q_norm"),                               \
    ONE("model.layers.#.self_attn.k_norm", "blk.#.attn_k_norm")

static const hf_tmap TM_QWEN3[] = {
    TM_DECODER_ATTN(HF_XF_NONE, HF_XF_NONE), TM_QK_NORM, TM_DENSE_FFN,
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* Qwen3-MoE (Qwen3MoeModel, a Qwen2MoeModel): qwen3's attention, a router over the experts
 * (config num_experts; transformers 5 writes num_local_experts: TextModel's find_hparam order)
 * of moe_intermediate_size stacked per layer, no shared expert. llama.cpp's qwen3moe graph
 * always renormalizes the top-k weights (norm_topk_prob true, as the released models have;
 * the converter writes no key for it and converts a false one all the same, to a file whose
 * logits differ): tensorbox refuses norm_topk_prob false (ARCH_NORM_TOPK). */
static const hf_hparam HP_QWEN3MOE[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"expert_count", HP_U32, {"num_local_experts", "num_experts"}, true},
    {"expert_used_count", HP_U32, {"num_experts_per_tok"}, true},
    {"expert_feed_forward_length", HP_U32, {"moe_intermediate_size"}, false},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_tmap TM_QWEN3MOE[] = {
    TM_DECODER_ATTN(HF_XF_NONE, HF_XF_NONE), TM_QK_NORM,
    ONE("model.layers.#.mlp.gate", "blk.#.ffn_gate_inp"),
    {"model.layers.#.mlp.experts.@.gate_proj", "blk.#.ffn_gate_exps", HF_MAP_STACK, HF_XF_NONE,
     0.0f, NULL},
    {"model.layers.#.mlp.experts.@.up_proj", "blk.#.ffn_up_exps", HF_MAP_STACK, HF_XF_NONE, 0.0f,
     NULL},
    {"model.layers.#.mlp.experts.@.down_proj", "blk.#.ffn_down_exps", HF_MAP_STACK, HF_XF_NONE,
     0.0f, NULL},
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* OLMo 2 (Olmo2Model, a TextModel; llama.cpp's olmo2 uses the rotate-half rope: no reordering):
 * no norm before attention or feed-forward but one after each (post_attention_layernorm is
 * gguf-py's ATTN_POST_NORM, blk.N.post_attention_norm, for olmo2; post_feedforward_layernorm
 * FFN_POST_NORM, blk.N.post_ffw_norm), and RMS norms
 * of the whole q and k projections (q_norm [heads x head size], k_norm [kv heads x head size]) */
static const hf_tmap TM_OLMO2[] = {
    ONE("model.embed_tokens", "token_embd"),
    ONE("model.norm", "output_norm"),
    ONE("lm_head", "output"),
    ONE("model.layers.#.self_attn.q_proj", "blk.#.attn_q"),
    ONE("model.layers.#.self_attn.k_proj", "blk.#.attn_k"),
    ONE("model.layers.#.self_attn.v_proj", "blk.#.attn_v"),
    ONE("model.layers.#.self_attn.o_proj", "blk.#.attn_output"),
    TM_QK_NORM,
    ONE("model.layers.#.post_attention_layernorm", "blk.#.post_attention_norm"),
    ONE("model.layers.#.post_feedforward_layernorm", "blk.#.post_ffw_norm"),
    TM_DENSE_FFN,
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* Granite (GraniteModel, a LlamaModel: llama's tensors and q/k reordering) and its multipliers,
 * each written when not 0 under gguf-py's names (1 when config.json has none: GraniteConfig's
 * default, which the converter reads): the embeddings scaled by embedding_multiplier, each
 * residual branch by residual_multiplier, the attention scores by attention_multiplier
 * (instead of 1/sqrt(head size)), the logits divided by logits_scaling. */
static const hf_hparam HP_GRANITE[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"attention.scale", HP_F32_NZ, {"attention_multiplier", "=1"}, false},
    {"embedding_scale", HP_F32_NZ, {"embedding_multiplier", "=1"}, false},
    {"residual_scale", HP_F32_NZ, {"residual_multiplier", "=1"}, false},
    /* llama.cpp's granite loader requires logit_scale: a logits_scaling of 0, which the
     * converter leaves out, would give a file it does not load, so it is refused here */
    {"logit_scale", HP_F32_NZ, {"logits_scaling", "=1"}, true},
    {NULL, HP_U32, {NULL}, false},
};
/* ---- end of issue 22's qwen3 / qwen3_moe / olmo2 / granite / mistral block ------------------ */

static const char *const SKIP_DECODER[] = {"model.layers.#.self_attn.rotary_emb.inv_freq", NULL};

/* ModernBERT (convert_hf_to_gguf.py's ModernBertModel, llama.cpp's "modern-bert"): "model."
 * dropped; q, k and v stay fused (attn_qkv) and Wi keeps its GLU halves (ffn_up: 2 x
 * feed_forward_length rows), as llama.cpp's loader takes them; no biases, layer 0 without
 * attn_norm. Its norm epsilon is norm_eps (llama.cpp reads attention.layer_norm_epsilon). */
static const hf_hparam HP_MODERNBERT[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.layer_norm_epsilon", HP_F32, {"norm_eps", "layer_norm_eps"}, true},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_tmap TM_MODERNBERT[] = {
    ONE("embeddings.tok_embeddings", "token_embd"),
    ONE("embeddings.norm", "token_embd_norm"),
    ONE("final_norm", "output_norm"),
    ONE("layers.#.attn_norm", "blk.#.attn_norm"),
    ONE("layers.#.attn.Wqkv", "blk.#.attn_qkv"),
    ONE("layers.#.attn.Wo", "blk.#.attn_output"),
    ONE("layers.#.mlp_norm", "blk.#.ffn_norm"),
    ONE("layers.#.mlp.Wi", "blk.#.ffn_up"),
    ONE("layers.#.mlp.Wo", "blk.#.ffn_down"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const char *const SKIP_MODERNBERT[] = {NULL};

/* Nomic BERT (nomic-embed-text v1, v1.5; convert_hf_to_gguf.py's NomicBertModel, llama.cpp's
 * "nomic-bert"; its modeling code is not in transformers): BERT's post-norm body without
 * position embeddings (rotary, NEOX order: no reordering) and without biases, q, k and v fused
 * (attn_qkv, kept as llama.cpp loads it), SwiGLU with fc11 the up and fc12 the gate
 * projection. Its config names are GPT-2's (n_embd, n_layer, ...); the context is the trained
 * one (max_trained_positions, as the converter turns n_positions 8192 into 2048). */
static const hf_hparam HP_NOMIC_BERT[] = {
    {"context_length", HP_U32, {"max_trained_positions", "n_positions"}, true},
    {"embedding_length", HP_U32, {"n_embd"}, true},
    {"block_count", HP_U32, {"n_layer"}, true},
    {"feed_forward_length", HP_U32, {"n_inner"}, true},
    {"attention.head_count", HP_U32, {"n_head"}, true},
    {"rope.freq_base", HP_F32, {"rotary_emb_base"}, false},
    {"attention.layer_norm_epsilon", HP_F32, {"layer_norm_epsilon"}, true},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_tmap TM_NOMIC_BERT[] = {
    ONE("embeddings.word_embeddings", "token_embd"),
    ONE("embeddings.token_type_embeddings", "token_types"),
    ONE("emb_ln", "token_embd_norm"),
    ONE("encoder.layers.#.attn.Wqkv", "blk.#.attn_qkv"),
    ONE("encoder.layers.#.attn.out_proj", "blk.#.attn_output"),
    ONE("encoder.layers.#.norm1", "blk.#.attn_output_norm"),
    ONE("encoder.layers.#.mlp.fc11", "blk.#.ffn_up"),
    ONE("encoder.layers.#.mlp.fc12", "blk.#.ffn_gate"),
    ONE("encoder.layers.#.mlp.fc2", "blk.#.ffn_down"),
    ONE("encoder.layers.#.norm2", "blk.#.layer_output_norm"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};

/* ---- Gemma (issue 22): convert_hf_to_gguf.py's GemmaModel, Gemma2Model, Gemma3Model ------ */
/* Gemma's RMSNorm multiplies by (1 + w): llama.cpp's converter adds 1 to every tensor whose
 * name ends in "norm.weight" (HF_XF_ADD 1; the engine adds in f32, transformers' 1.0 +
 * weight.float(): the converter's bytes for bf16 and f32 checkpoints, the exact value where the
 * converter rounds 1 + w to f16 for an f16 one), and llama.cpp's runtime scales the embeddings by
 * sqrt(hidden_size) itself. q/k rows are not reordered (llama.cpp's gemma rope is NEOX). The
 * converter writes head_count_kv always (the head count without num_key_value_heads); GemmaModel
 * and Gemma2Model write no rope.freq_base (llama.cpp's default 10000 is Gemma's rope_theta):
 * tensorbox writes config.json's rope_theta so that another value is not lost. */
static const hf_hparam HP_GEMMA[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads", "num_attention_heads"}, true},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {NULL, HP_U32, {NULL}, false},
};
/* Gemma 2: logit soft-capping of the attention scores and of the output, the sliding window of
 * its local layers (llama.cpp: every other layer, the first one local) */
static const hf_hparam HP_GEMMA2[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads", "num_attention_heads"}, true},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"attn_logit_softcapping", HP_F32, {"attn_logit_softcapping"}, true},
    {"final_logit_softcapping", HP_F32, {"final_logit_softcapping"}, true},
    {"attention.sliding_window", HP_U32, {"sliding_window"}, true},
    {NULL, HP_U32, {NULL}, false},
};
/* Gemma 3 (TextModel's keys and Gemma3Model's): rope_theta of the global layers
 * (rope_parameters.full_attention in transformers 5) and of the local ones (freq_base_swa:
 * rope_local_base_freq, or rope_parameters.sliding_attention; hf_gguf.c's cfg_field), no
 * attention soft-capping, an optional final one, the sliding window (llama.cpp: five local
 * layers, then a global one) */
static const hf_hparam HP_GEMMA3[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, true},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"rope.freq_base_swa", HP_F32, {"rope_local_base_freq"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"final_logit_softcapping", HP_F32, {"final_logit_softcapping"}, false},
    {"attention.sliding_window", HP_U32, {"sliding_window"}, false},
    {NULL, HP_U32, {NULL}, false},
};

#define NORM1(HF, GG) {HF, GG, HF_MAP_ONE, HF_XF_ADD, 1.0f, NULL}
#define TM_GEMMA_COMMON(P)                                                                     \
    ONE(P "embed_tokens", "token_embd"),                                                       \
    NORM1(P "norm", "output_norm"),                                                            \
    NORM1(P "layers.#.input_layernorm", "blk.#.attn_norm"),                                    \
    ONE(P "layers.#.self_attn.q_proj", "blk.#.attn_q"),                                        \
    ONE(P "layers.#.self_attn.k_proj", "blk.#.attn_k"),                                        \
    ONE(P "layers.#.self_attn.v_proj", "blk.#.attn_v"),                                        \
    ONE(P "layers.#.self_attn.o_proj", "blk.#.attn_output"),                                   \
    ONE(P "layers.#.mlp.gate_proj", "blk.#.ffn_gate"),                                         \
    ONE(P "layers.#.mlp.up_proj", "blk.#.ffn_up"),                                             \
    ONE(P "layers.#.mlp.down_proj", "blk.#.ffn_down")
/* Gemma 2 and 3: a norm after attention and one before and after the feed-forward */
#define TM_GEMMA2_NORMS(P)                                                                     \
    NORM1(P "layers.#.post_attention_layernorm", "blk.#.post_attention_norm"),                 \
    NORM1(P "layers.#.pre_feedforward_layernorm", "blk.#.ffn_norm"),                           \
    NORM1(P "layers.#.post_feedforward_layernorm", "blk.#.post_ffw_norm")
/* Gemma 3: and q/k norms */
#define TM_GEMMA3(P)                                                                           \
    TM_GEMMA_COMMON(P), TM_GEMMA2_NORMS(P),                                                    \
    NORM1(P "layers.#.self_attn.q_norm", "blk.#.attn_q_norm"),                                 \
    NORM1(P "layers.#.self_attn.k_norm", "blk.#.attn_k_norm")

static const hf_tmap TM_GEMMA[] = {
    TM_GEMMA_COMMON("model."),
    NORM1("model.layers.#.post_attention_layernorm", "blk.#.ffn_norm"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const hf_tmap TM_GEMMA2[] = {
    TM_GEMMA_COMMON("model."), TM_GEMMA2_NORMS("model."),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const hf_tmap TM_GEMMA3_TEXT[] = {
    TM_GEMMA3("model."), ONE("lm_head", "output"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* Gemma3ForConditionalGeneration: the language model's tensors under model.language_model.
 * (transformers 5) or language_model.model. (4.x; its lm_head under language_model.), which
 * the row's prefixes drop, as TextModel drops "language_model."; the vision tower and the
 * projector are left out, as convert_hf_to_gguf.py leaves them out of the text model (its
 * --mmproj writes them to a separate file, which tensorbox does not) */
static const hf_tmap TM_GEMMA3_MM[] = {
    TM_GEMMA3(""), ONE("lm_head", "output"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
/* GemmaModel and Gemma2Model leave lm_head out (the output is the tied embedding) */
static const char *const SKIP_GEMMA[] = {"model.layers.#.self_attn.rotary_emb.inv_freq",
                                         "lm_head.weight", NULL};
static const char *const SKIP_GEMMA3_MM[] = {"model.vision_tower.*", "model.multi_modal_projector.*",
                                             "vision_tower.*", "multi_modal_projector.*", NULL};
/* ---- end of Gemma ------------------------------------------------------------------------ */

/* Phi-3 (convert_hf_to_gguf.py's Phi3MiniModel): q, k and v fused in qkv_proj and gate and up
 * in gate_up_proj, both kept whole (llama.cpp's phi3 graph splits them: attn_qkv, ffn_up of
 * 2 x feed_forward_length rows); the rotary embedding in NEOX form (no reordering). Its
 * hyper-parameters are the converter's own list (no vocab_size): head_count_kv always,
 * original_max_position_embeddings required, sliding_window 0 when absent. */
static const hf_hparam HP_PHI3[] = {
    {"context_length", HP_U32, {"n_positions", "max_position_embeddings"}, true},
    {"rope.scaling.original_context_length", HP_U32, {"original_max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size", "n_embd"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads", "n_head"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads", "n_head_kv"}, true},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"rope.freq_base", HP_F32, {"rope_theta"}, true},
    {"attention.sliding_window", HP_U32, {"sliding_window", "=0"}, false},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_tmap TM_PHI3[] = {
    ONE("model.embed_tokens", "token_embd"),
    ONE("model.norm", "output_norm"),
    ONE("lm_head", "output"),
    ONE("model.layers.#.input_layernorm", "blk.#.attn_norm"),
    ONE("model.layers.#.self_attn.qkv_proj", "blk.#.attn_qkv"),
    ONE("model.layers.#.self_attn.o_proj", "blk.#.attn_output"),
    ONE("model.layers.#.post_attention_layernorm", "blk.#.ffn_norm"),
    ONE("model.layers.#.mlp.gate_up_proj", "blk.#.ffn_up"),
    ONE("model.layers.#.mlp.down_proj", "blk.#.ffn_down"),
    {NULL, NULL, 0, 0, 0.0f, NULL},
};

/* ---- gpt-oss (issue 22; convert_hf_to_gguf.py's GptOssModel, llama.cpp's openai-moe.cpp) --- */
/* TextModel's keys (yarn's beta_fast / beta_slow among them), the sliding window and the
 * experts' feed-forward length (intermediate_size, as GptOssModel writes it) */
static const hf_hparam HP_GPT_OSS[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"rope.freq_base", HP_F32, {"rope_theta"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"expert_count", HP_U32, {"num_local_experts", "num_experts"}, true},
    {"expert_used_count", HP_U32, {"num_experts_per_tok"}, true},
    {"attention.sliding_window", HP_U32, {"sliding_window"}, true},
    {"expert_feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {NULL, HP_U32, {NULL}, false},
};
/* The experts of a layer are three 3-D parameters stored for x @ W ([experts, in, out]):
 * gate_up_proj [n, hidden, 2 x ff] with the gate's and the up's columns interleaved (gate
 * even, up odd), down_proj [n, ff, hidden]; llama.cpp's ffn_*_exps are [n, out, in]: each
 * expert transposed, the interleave taken apart; their biases likewise ([n, 2 x ff] taken
 * apart, [n, hidden] as it is). The router has a bias, each head an attention sink
 * (self_attn.sinks, [heads]), post_attention_layernorm is gguf-py's ATTN_POST_NORM for
 * gpt-oss. The HF names without a suffix get theirs from the template. */
static const hf_part PARTS_OAI_GATE_UP[] = {
    {"blk.#.ffn_gate_exps.weight", HD_FX, HF_XF_TRANSPOSE, 0.0f},
    {"blk.#.ffn_up_exps.weight", HD_FX, HF_XF_TRANSPOSE, 0.0f},
    {NULL, 0, 0, 0.0f},
};
static const hf_part PARTS_OAI_GATE_UP_BIAS[] = {
    {"blk.#.ffn_gate_exps.bias", HD_FX, HF_XF_NONE, 0.0f},
    {"blk.#.ffn_up_exps.bias", HD_FX, HF_XF_NONE, 0.0f},
    {NULL, 0, 0, 0.0f},
};
/* The released checkpoints' experts (openai/gpt-oss-*): MXFP4 blocks and scales, already [n,
 * out, in] (rows of 32-value blocks), repacked to ggml's MXFP4 as llama.cpp's converter does;
 * gate_up's rows interleave the gate's and the up's (gate even, up odd) */
static const hf_part PARTS_OAI_GATE_UP_MX[] = {
    {"blk.#.ffn_gate_exps.weight", HD_FX, HF_XF_MXFP4, 0.0f},
    {"blk.#.ffn_up_exps.weight", HD_FX, HF_XF_MXFP4, 0.0f},
    {NULL, 0, 0, 0.0f},
};
static const hf_tmap TM_GPT_OSS[] = {
    ONE("model.embed_tokens", "token_embd"),
    ONE("model.norm", "output_norm"),
    ONE("lm_head", "output"),
    ONE("model.layers.#.input_layernorm", "blk.#.attn_norm"),
    ONE("model.layers.#.self_attn.q_proj", "blk.#.attn_q"),
    ONE("model.layers.#.self_attn.k_proj", "blk.#.attn_k"),
    ONE("model.layers.#.self_attn.v_proj", "blk.#.attn_v"),
    ONE("model.layers.#.self_attn.o_proj", "blk.#.attn_output"),
    ONE("model.layers.#.self_attn.sinks", "blk.#.attn_sinks.weight"),
    ONE("model.layers.#.post_attention_layernorm", "blk.#.post_attention_norm"),
    ONE("model.layers.#.mlp.router", "blk.#.ffn_gate_inp"),
    {"model.layers.#.mlp.experts.gate_up_proj", NULL, HF_MAP_INTERLEAVE, HF_XF_NONE, 0.0f,
     PARTS_OAI_GATE_UP},
    {"model.layers.#.mlp.experts.gate_up_proj_bias", NULL, HF_MAP_INTERLEAVE, HF_XF_NONE, 0.0f,
     PARTS_OAI_GATE_UP_BIAS},
    {"model.layers.#.mlp.experts.down_proj", "blk.#.ffn_down_exps.weight", HF_MAP_ONE,
     HF_XF_TRANSPOSE, 0.0f, NULL},
    ONE("model.layers.#.mlp.experts.down_proj_bias", "blk.#.ffn_down_exps.bias"),
    {"model.layers.#.mlp.experts.gate_up_proj_blocks", NULL, HF_MAP_INTERLEAVE, HF_XF_MXFP4,
     0.0f, PARTS_OAI_GATE_UP_MX},
    {"model.layers.#.mlp.experts.gate_up_proj_scales", NULL, HF_MAP_SCALES, HF_XF_NONE, 0.0f,
     NULL},
    {"model.layers.#.mlp.experts.down_proj_blocks", "blk.#.ffn_down_exps.weight", HF_MAP_ONE,
     HF_XF_MXFP4, 0.0f, NULL},
    {"model.layers.#.mlp.experts.down_proj_scales", NULL, HF_MAP_SCALES, HF_XF_NONE, 0.0f,
     NULL},
    {NULL, NULL, 0, 0, 0.0f, NULL},
};

/* Rows, in the order the supported list shows them. rope: convert_hf_to_gguf.py's BaichuanModel
 * writes linear scaling's keys; its Qwen2MoeModel yarn's; its LlamaModel
 * (llama, and mixtral, which it converts as "llama") writes linear scaling's keys and llama3's
 * rope_freqs; its Qwen2Model writes yarn's keys; tensorbox also takes linear for qwen2. */
static const hf_arch ARCHES[] = {
    {"baichuan", "baichuan", {NULL}, HP_BAICHUAN, TM_BAICHUAN, SKIP_DECODER, ARCH_ROPE_DIM,
     TBX_HF_TOK_SPM, TBX_HF_ROPE_LINEAR},
    {"bert", "bert", {"bert."}, HP_BERT, TM_BERT, SKIP_BERT,
     ARCH_NONCAUSAL | ARCH_POOLING | ARCH_TT_COUNT, TBX_HF_TOK_WORDPIECE, 0},
    {"llama", "llama", {NULL}, HP_LLAMA, TM_LLAMA, SKIP_DECODER,
     ARCH_VOCAB_SIZE | ARCH_ROPE_DIM | ARCH_SPACE_PREFIX, TBX_HF_TOK_SPM | TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_LLAMA3},
    {"mixtral", "llama", {NULL}, HP_MIXTRAL, TM_MIXTRAL, SKIP_DECODER,
     ARCH_VOCAB_SIZE | ARCH_ROPE_DIM | ARCH_SPACE_PREFIX, TBX_HF_TOK_SPM | TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_LLAMA3},
    {"qwen2", "qwen2", {NULL}, HP_LLAMA, TM_QWEN2, SKIP_DECODER, 0, TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_YARN},
    {"qwen2_moe", "qwen2moe", {NULL}, HP_QWEN2MOE, TM_QWEN2MOE, SKIP_DECODER, 0, TBX_HF_TOK_BPE,
     TBX_HF_ROPE_YARN},
    /* issue 22: qwen3, qwen3_moe, olmo2, granite, mistral. rope: TextModel (Qwen3Model,
     * Qwen3MoeModel, Olmo2Model) writes linear's and yarn's keys; GraniteModel and mistral
     * (MistralForCausalLM is convert_hf_to_gguf.py's LlamaModel) are llama's. */
    {"qwen3", "qwen3", {NULL}, HP_LLAMA, TM_QWEN3, SKIP_DECODER, 0, TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_YARN},
    {"qwen3_moe", "qwen3moe", {NULL}, HP_QWEN3MOE, TM_QWEN3MOE, SKIP_DECODER, ARCH_NORM_TOPK,
     TBX_HF_TOK_BPE, TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_YARN},
    {"olmo2", "olmo2", {NULL}, HP_LLAMA, TM_OLMO2, SKIP_DECODER, 0, TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_YARN},
    {"granite", "granite", {NULL}, HP_GRANITE, TM_LLAMA, SKIP_DECODER,
     ARCH_VOCAB_SIZE | ARCH_ROPE_DIM | ARCH_SPACE_PREFIX | ARCH_NO_HEAD_DIM,
     TBX_HF_TOK_SPM | TBX_HF_TOK_BPE, TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_LLAMA3},
    {"mistral", "llama", {NULL}, HP_LLAMA, TM_LLAMA, SKIP_DECODER,
     ARCH_VOCAB_SIZE | ARCH_ROPE_DIM | ARCH_SPACE_PREFIX, TBX_HF_TOK_SPM | TBX_HF_TOK_BPE,
     TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_LLAMA3},
    /* Gemma (issue 22): tokenizer.model as GemmaModel.set_vocab (a byte_fallback tokenizer.json
     * otherwise); Gemma3Model writes linear rope scaling (of the global layers) and drops the
     * token embedding's rows past vocab_size (ARCH_TRIM_VOCAB) */
    {"gemma", "gemma", {NULL}, HP_GEMMA, TM_GEMMA, SKIP_GEMMA,
     ARCH_NO_SPACE_PREFIX | ARCH_GEMMA_EOT, TBX_HF_TOK_SPM, 0},
    {"gemma2", "gemma2", {NULL}, HP_GEMMA2, TM_GEMMA2, SKIP_GEMMA, ARCH_NO_SPACE_PREFIX,
     TBX_HF_TOK_SPM, 0},
    {"gemma3_text", "gemma3", {NULL}, HP_GEMMA3, TM_GEMMA3_TEXT, SKIP_DECODER,
     ARCH_NO_SPACE_PREFIX | ARCH_TRIM_VOCAB, TBX_HF_TOK_SPM, TBX_HF_ROPE_LINEAR},
    {"gemma3", "gemma3", {"model.language_model.", "language_model.model.", "language_model."},
     HP_GEMMA3, TM_GEMMA3_MM, SKIP_GEMMA3_MM,
     ARCH_NO_SPACE_PREFIX | ARCH_TEXT_CONFIG | ARCH_TRIM_VOCAB,
     TBX_HF_TOK_SPM, TBX_HF_ROPE_LINEAR},
    /* XLM-RoBERTa (bge-m3, multilingual-e5; convert_hf_to_gguf.py's XLMRobertaModel): BERT's
     * body and names ("roberta." dropped, as its filter_tensors), positions from
     * pad_token_id + 1 (ARCH_POS_OFFSET), the Unigram sentencepiece.bpe.model (else
     * tokenizer.json's Unigram model) as llama.cpp's "t5" vocabulary */
    {"xlm-roberta", "bert", {"roberta."}, HP_BERT, TM_BERT, SKIP_BERT,
     ARCH_NONCAUSAL | ARCH_POOLING | ARCH_TT_COUNT | ARCH_POS_OFFSET | ARCH_ADD_SEP,
     TBX_HF_TOK_UGM, 0},
    {"modernbert", "modern-bert", {"model."}, HP_MODERNBERT, TM_MODERNBERT, SKIP_MODERNBERT,
     ARCH_NONCAUSAL | ARCH_POOLING | ARCH_VOCAB_SIZE | ARCH_SWA | ARCH_HIDDEN_ACT |
     ARCH_PRE_MODERN_BERT | ARCH_ADD_SEP | ARCH_CLS_POOLING | ARCH_ROPE_NONE | ARCH_FFN_UP_GLU,
     TBX_HF_TOK_BPE, 0},
    {"nomic_bert", "nomic-bert", {NULL}, HP_NOMIC_BERT, TM_NOMIC_BERT, SKIP_BERT,
     ARCH_NONCAUSAL | ARCH_POOLING | ARCH_TT_COUNT, TBX_HF_TOK_WORDPIECE, 0},
    /* Phi3MiniModel: tokenizer.model (its own added-token rules), a GPT-2 BPE for Phi-4;
     * longrope's factors */
    {"phi3", "phi3", {NULL}, HP_PHI3, TM_PHI3, SKIP_DECODER,
     ARCH_ROPE_DIM | ARCH_ROPE_PARTIAL | ARCH_FFN_UP_GLU | ARCH_SPM_ADDED,
     TBX_HF_TOK_SPM | TBX_HF_TOK_BPE, TBX_HF_ROPE_LONGROPE},
    /* GptOssModel: _set_vocab_gpt2 (o200k's "gpt-4o" split), TextModel's yarn keys */
    {"gpt_oss", "gpt-oss", {NULL}, HP_GPT_OSS, TM_GPT_OSS, SKIP_DECODER, ARCH_SWIGLU_OAI,
     TBX_HF_TOK_BPE, TBX_HF_ROPE_LINEAR | TBX_HF_ROPE_YARN},
};

size_t tbx_hf_arch_count_(void) { return sizeof ARCHES / sizeof ARCHES[0]; }

const hf_arch *tbx_hf_arch_at_(size_t i) {
    return i < sizeof ARCHES / sizeof ARCHES[0] ? &ARCHES[i] : NULL;
}

const hf_arch *tbx_hf_arch_test_ = NULL;

const hf_arch *tbx_hf_arch_find_(const char *mt) {
    for (size_t i = 0; mt && i < sizeof ARCHES / sizeof ARCHES[0]; i++)
        if (strcmp(mt, ARCHES[i].model_type) == 0) return &ARCHES[i];
    if (mt && tbx_hf_arch_test_ && strcmp(mt, tbx_hf_arch_test_->model_type) == 0)
        return tbx_hf_arch_test_;
    return NULL;
}

static void append(char *buf, size_t cap, size_t *n, const char *s) {
    int w = snprintf(buf + *n, cap - *n, "%s%s", *n ? ", " : "", s);
    if (w > 0) *n = *n + (size_t)w < cap ? *n + (size_t)w : cap - 1;
}

void tbx_hf_rope_names_(unsigned mask, char *buf, size_t cap) {
    static const struct { unsigned bit; const char *name; } R[] = {
        {TBX_HF_ROPE_LINEAR, "linear"}, {TBX_HF_ROPE_LLAMA3, "llama3"}, {TBX_HF_ROPE_YARN, "yarn"},
        {TBX_HF_ROPE_LONGROPE, "longrope"},
    };
    size_t n = 0;
    if (!cap) return;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++)
        if (mask & R[i].bit) append(buf, cap, &n, R[i].name);
    if (!n) snprintf(buf, cap, "none");
}

/* Levenshtein distance between a and b, ASCII case folded; both are bounded by the caller
 * (model_type strings of config.json, cut at HF_NEAR_MAX bytes). */
#define HF_NEAR_MAX 64
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > HF_NEAR_MAX) la = HF_NEAR_MAX;
    if (lb > HF_NEAR_MAX) lb = HF_NEAR_MAX;
    size_t prev[HF_NEAR_MAX + 1], cur[HF_NEAR_MAX + 1];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            const int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

const hf_arch *tbx_hf_arch_nearest_(const char *mt) {
    const hf_arch *best = NULL;
    size_t bd = (size_t)-1;
    for (size_t i = 0; mt && *mt && i < sizeof ARCHES / sizeof ARCHES[0]; i++) {
        size_t d = edit_distance(mt, ARCHES[i].model_type);
        if (d < bd) { bd = d; best = &ARCHES[i]; }
    }
    return best;
}

void tbx_hf_arch_list_(unsigned tok, char *buf, size_t cap) {
    size_t n = 0;
    if (!cap) return;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof ARCHES / sizeof ARCHES[0]; i++)
        if (!tok || (ARCHES[i].tokenizers & tok)) append(buf, cap, &n, ARCHES[i].model_type);
}

/* The public list (tensorbox/gguf.h) */
size_t tbx_gguf_hf_arch_count(void) { return sizeof ARCHES / sizeof ARCHES[0]; }

const char *tbx_gguf_hf_arch_at(size_t i, const char **arch) {
    const hf_arch *a = tbx_hf_arch_at_(i);
    if (arch) *arch = a ? a->arch : NULL;
    return a ? a->model_type : NULL;
}
