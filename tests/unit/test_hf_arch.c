/*
 * test_hf_arch.c - the map entries of the Hugging Face -> GGUF architecture rows (arch.h) that
 * are more than one tensor to one, through a conversion: a test row (tbx_hf_arch_test_, outside
 * the table) whose fused qkv and gate_up projections are split into row ranges (q and k
 * permuted by heads, up scaled by 0.5), whose experts, written out of order, are stacked into
 * one [n_expert, rows, cols] tensor, and whose norms are scaled or shifted. Every output value
 * is compared with the one computed here from the input values' definition (val) and the
 * rules in plan.h / llama.cpp's converter (its LlamaModel.permute, torch.stack of experts);
 * the row ranges that do not cover the fused tensor and an expert missing are errors naming
 * the tensor; every allocation failure of such a conversion is clean. The table's own public
 * list is checked too (tbx_gguf_hf_arch_at against the rows tbx_hf_arch_at_ reads).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"
#include "arch.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];
static char g_out[600];

/* hidden 8, 2 heads of 4 (q: 8 rows), 1 kv head (k, v: 4 rows each), feed-forward 16, 3
 * experts, a vocabulary of 6, one layer */
enum { E = 8, NH = 2, NKV = 1, HD = 4, FF = 16, NX = 3, V = 6 };

static const hf_hparam HP[] = {
    {"context_length", HP_U32, {"max_position_embeddings"}, true},
    {"embedding_length", HP_U32, {"hidden_size"}, true},
    {"block_count", HP_U32, {"num_hidden_layers"}, true},
    {"feed_forward_length", HP_U32, {"intermediate_size"}, true},
    {"attention.head_count", HP_U32, {"num_attention_heads"}, true},
    {"attention.head_count_kv", HP_U32, {"num_key_value_heads"}, false},
    {"attention.layer_norm_rms_epsilon", HP_F32, {"rms_norm_eps"}, true},
    {"expert_count", HP_U32, {"num_local_experts"}, true},
    {NULL, HP_U32, {NULL}, false},
};
static const hf_part QKV[] = {
    {"blk.#.attn_q", HD_Q, HF_XF_PERMUTE_Q, 0.0f},
    {"blk.#.attn_k", HD_K, HF_XF_PERMUTE_K, 0.0f},
    {"blk.#.attn_v", HD_K, HF_XF_NONE, 0.0f},
    {NULL, 0, 0, 0.0f},
};
static const hf_part GATE_UP[] = {
    {"blk.#.ffn_gate", HD_F, HF_XF_NONE, 0.0f},
    {"blk.#.ffn_up", HD_F, HF_XF_SCALE, 0.5f},
    {NULL, 0, 0, 0.0f},
};
static const hf_tmap TM[] = {
    {"model.embed_tokens", "token_embd", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"lm_head", "output", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"model.norm", "output_norm", HF_MAP_ONE, HF_XF_ADD, 1.0f, NULL},
    {"model.layers.#.input_layernorm", "blk.#.attn_norm", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.post_attention_layernorm", "blk.#.ffn_norm", HF_MAP_ONE, HF_XF_SCALE, 2.0f,
     NULL},
    {"model.layers.#.self_attn.qkv_proj", NULL, HF_MAP_SPLIT, HF_XF_NONE, 0.0f, QKV},
    {"model.layers.#.self_attn.o_proj", "blk.#.attn_output", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.mlp.gate_up_proj", NULL, HF_MAP_SPLIT, HF_XF_NONE, 0.0f, GATE_UP},
    {"model.layers.#.mlp.down_proj", "blk.#.ffn_down", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.mlp.router", "blk.#.ffn_gate_inp", HF_MAP_ONE, HF_XF_NONE, 0.0f, NULL},
    {"model.layers.#.mlp.experts.@.down", "blk.#.ffn_down_exps", HF_MAP_STACK, HF_XF_NONE, 0.0f,
     NULL},
    {NULL, NULL, 0, 0, 0.0f, NULL},
};
static const char *const SKIP[] = {NULL};
static const hf_arch ROW = {"tbx_test_fused", "llama", {NULL}, HP, TM, SKIP,
                            ARCH_VOCAB_SIZE | ARCH_ROPE_DIM, TBX_HF_TOK_BPE, 0};

static const char CONFIG[] =
    "{\"model_type\": \"tbx_test_fused\", \"hidden_size\": 8, \"intermediate_size\": 16,"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,"
    " \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05, \"num_local_experts\": 3}";
static const char TOKENIZER[] =
    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2, \"b\": 3, \"ab\": 4, \"c\": 5},"
    " \"merges\": [[\"a\", \"b\"]]},"
    " \"added_tokens\": [{\"id\": 0, \"content\": \"<s>\", \"special\": true},"
    " {\"id\": 1, \"content\": \"</s>\", \"special\": true}]}";

/* The HF tensors, experts out of order (the stack follows their numbers) */
static const struct { const char *name; uint64_t rows, cols; } T[] = {
    {"model.embed_tokens.weight", V, E},
    {"model.layers.0.mlp.experts.2.down.weight", E, FF},
    {"model.layers.0.input_layernorm.weight", 0, E},
    {"model.layers.0.self_attn.qkv_proj.weight", (NH + 2 * NKV) * HD, E},
    {"model.layers.0.self_attn.o_proj.weight", E, NH * HD},
    {"model.layers.0.mlp.experts.0.down.weight", E, FF},
    {"model.layers.0.post_attention_layernorm.weight", 0, E},
    {"model.layers.0.mlp.gate_up_proj.weight", 2 * FF, E},
    {"model.layers.0.mlp.down_proj.weight", E, FF},
    {"model.layers.0.mlp.router.weight", NX, E},
    {"model.layers.0.mlp.experts.1.down.weight", E, FF},
    {"model.norm.weight", 0, E},
    {"lm_head.weight", V, E},
};
#define NT (sizeof T / sizeof T[0])

/* Value of element (r, c) of HF tensor k: distinct for every tensor, row and column (exact in
 * f32, and after * 0.5, * 2, + 1). */
static float val(size_t k, uint64_t r, uint64_t c) { return (float)(k * 1000 + r * 32 + c); }

static size_t tidx(const char *name) {
    for (size_t k = 0; k < NT; k++)
        if (strcmp(T[k].name, name) == 0) return k;
    abort();
}

static void rm_tmp(void) {
    static const char *files[] = {"config.json", "tokenizer.json", "model.safetensors", NULL};
    char p[800];
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
    unlink(g_out);
}

static void write_str(const char *name, const char *s) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(s, 1, strlen(s), f) != strlen(s)) abort();
    fclose(f);
}

/* The model directory, every tensor of T but `leave_out` (NULL: all), `qkv_rows` rows in the
 * fused qkv. */
static void new_model(const char *leave_out, uint64_t qkv_rows) {
    if (!g_dir[0]) {
        if (!mkdtemp(tbx_test_tmppath(g_dir, sizeof g_dir, "tbx_test_hf_arch_XXXXXX"))) abort();
        snprintf(g_out, sizeof g_out, "%s.out.gguf", g_dir);
        atexit(rm_tmp);
    }
    write_str("config.json", CONFIG);
    write_str("tokenizer.json", TOKENIZER);
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    unlink(p);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, p, &wo, &e) != TBX_OK) abort();
    uint64_t idx[NT], n = 0;
    for (size_t k = 0; k < NT; k++) {
        if (leave_out && strcmp(T[k].name, leave_out) == 0) continue;
        uint64_t rows = k == tidx("model.layers.0.self_attn.qkv_proj.weight") ? qkv_rows
                                                                               : T[k].rows;
        uint64_t shape[2] = {rows, T[k].cols};
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = T[k].name;
        d.name_len = strlen(T[k].name);
        d.dtype = TBX_DT_F32;
        d.ndim = rows ? 2 : 1;
        d.shape = rows ? shape : shape + 1;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
        idx[k] = n++;
    }
    for (size_t k = 0; k < NT; k++) {
        if (leave_out && strcmp(T[k].name, leave_out) == 0) continue;
        uint64_t rows = k == tidx("model.layers.0.self_attn.qkv_proj.weight") ? qkv_rows
                                                                               : T[k].rows;
        for (uint64_t r = 0; r < (rows ? rows : 1); r++)
            for (uint64_t c = 0; c < T[k].cols; c++) {
                float x = val(k, r, c);
                if (tbx_writer_write_tensor(w, idx[k], &x, 4, &e) != TBX_OK) abort();
            }
    }
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
}

static tbx_status convert_armed(const tbx_allocator *al, int *armed, tbx_error *e) {
    return tbx_test_convert_gguf(al, armed, g_dir, g_out, 0, TBX_DT_INVALID, e);
}

/* llama.cpp's rotary order of a [heads x d, cols] projection (convert_hf_to_gguf.py's
 * LlamaModel.permute: reshape(heads, 2, d/2, cols).swapaxes(1, 2)): output row h*d + 2j + i is
 * input row h*d + i*d/2 + j. */
static uint64_t permuted_from(uint64_t out_row, uint64_t d) {
    uint64_t h = out_row / d, j = (out_row % d) / 2, i = out_row % 2;
    return h * d + i * (d / 2) + j;
}

/* Output tensor `name` of g has shape `shape` (ndim, outermost first) and value
 * want(k, x, r, c) at [x][r][c] (k: its HF tensor). */
typedef float (*want_fn)(uint64_t x, uint64_t r, uint64_t c);
static int check_tensor(tbx_file *g, const char *name, uint32_t ndim, const uint64_t *shape,
                        want_fn want) {
    uint64_t i;
    tbx_error e;
    if (tbx_tensor_find(g, name, &i) != TBX_OK) {
        fprintf(stderr, "%s: missing\n", name);
        return 0;
    }
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    if (tbx_tensor_info_get(g, i, &ti) != TBX_OK || ti.ndim != ndim) return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (ti.shape[d] != shape[d]) {
            fprintf(stderr, "%s: dim %u is %llu, want %llu\n", name, d,
                    (unsigned long long)ti.shape[d], (unsigned long long)shape[d]);
            return 0;
        }
        n *= shape[d];
    }
    float *got = malloc(n * sizeof *got);
    if (!got || tbx_tensor_read_f32(g, i, 0, n, got, &e) != TBX_OK) { free(got); return 0; }
    const uint64_t X = ndim == 3 ? shape[0] : 1, R = ndim >= 2 ? shape[ndim - 2] : 1,
                   C = shape[ndim - 1];
    int ok = 1;
    for (uint64_t x = 0; x < X; x++)
        for (uint64_t r = 0; r < R; r++)
            for (uint64_t c = 0; c < C; c++) {
                float w = want(x, r, c), v = got[(x * R + r) * C + c];
                if (v != w && ok) {
                    fprintf(stderr, "%s[%llu][%llu][%llu] = %g, want %g\n", name,
                            (unsigned long long)x, (unsigned long long)r, (unsigned long long)c,
                            v, w);
                    ok = 0;
                }
            }
    free(got);
    return ok;
}

#define QKV_T tidx("model.layers.0.self_attn.qkv_proj.weight")
#define GU_T tidx("model.layers.0.mlp.gate_up_proj.weight")
static float w_q(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(QKV_T, permuted_from(r, HD), c);
}
static float w_k(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(QKV_T, NH * HD + permuted_from(r, HD), c);
}
static float w_v(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(QKV_T, (NH + NKV) * HD + r, c);
}
static float w_gate(uint64_t x, uint64_t r, uint64_t c) { (void)x; return val(GU_T, r, c); }
static float w_up(uint64_t x, uint64_t r, uint64_t c) { (void)x; return val(GU_T, FF + r, c) * 0.5f; }
static float w_exps(uint64_t x, uint64_t r, uint64_t c) {
    char n[64];
    snprintf(n, sizeof n, "model.layers.0.mlp.experts.%llu.down.weight", (unsigned long long)x);
    return val(tidx(n), r, c);
}
static float w_onorm(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(tidx("model.norm.weight"), r, c) + 1.0f;
}
static float w_fnorm(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(tidx("model.layers.0.post_attention_layernorm.weight"), r, c) * 2.0f;
}
static float w_router(uint64_t x, uint64_t r, uint64_t c) {
    (void)x;
    return val(tidx("model.layers.0.mlp.router.weight"), r, c);
}

TBX_TEST(fused_split_experts_stacked_norms_transformed) {
    tbx_hf_arch_test_ = &ROW;
    new_model(NULL, (NH + 2 * NKV) * HD);
    tbx_error e;
    CHECK_OK(convert_armed(NULL, NULL, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    /* 13 HF tensors -> 15 outputs: qkv 1 -> 3, gate_up 1 -> 2, 3 experts -> 1 */
    CHECK_EQ(tbx_tensor_count(g), NT + 2 + 1 - 2);
    const uint64_t sq[] = {NH * HD, E}, sk[] = {NKV * HD, E}, sf[] = {FF, E},
                   sx[] = {NX, E, FF}, sn[] = {E}, sr[] = {NX, E};
    CHECK(check_tensor(g, "blk.0.attn_q.weight", 2, sq, w_q));
    CHECK(check_tensor(g, "blk.0.attn_k.weight", 2, sk, w_k));
    CHECK(check_tensor(g, "blk.0.attn_v.weight", 2, sk, w_v));
    CHECK(check_tensor(g, "blk.0.ffn_gate.weight", 2, sf, w_gate));
    CHECK(check_tensor(g, "blk.0.ffn_up.weight", 2, sf, w_up));
    CHECK(check_tensor(g, "blk.0.ffn_down_exps.weight", 3, sx, w_exps));
    CHECK(check_tensor(g, "output_norm.weight", 1, sn, w_onorm));
    CHECK(check_tensor(g, "blk.0.ffn_norm.weight", 1, sn, w_fnorm));
    CHECK(check_tensor(g, "blk.0.ffn_gate_inp.weight", 2, sr, w_router));
    size_t n;
    const char *arch = tbx_meta_get_str(g, "general.architecture", &n);
    CHECK(arch && n == 5 && memcmp(arch, "llama", 5) == 0);
    uint64_t ec = 0;
    CHECK(tbx_value_get_u64(tbx_meta_find(g, "llama.expert_count"), &ec) == TBX_OK && ec == NX);
    tbx_close(g);
    tbx_hf_arch_test_ = NULL;
}

TBX_TEST(split_and_stack_errors_name_the_tensor) {
    tbx_hf_arch_test_ = &ROW;
    tbx_error e;
    /* one row fewer in the fused qkv: q 8 + k 4 + v 4 do not fit 15 */
    new_model(NULL, (NH + 2 * NKV) * HD - 1);
    CHECK_EQ(convert_armed(NULL, NULL, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "qkv_proj.weight") && strstr(e.message, "15 rows") &&
          strstr(e.message, "do not split"));
    /* one more row: the parts leave one over */
    new_model(NULL, (NH + 2 * NKV) * HD + 1);
    CHECK_EQ(convert_armed(NULL, NULL, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "17 rows") != NULL);
    /* expert 1 missing between 0 and 2 */
    new_model("model.layers.0.mlp.experts.1.down.weight", (NH + 2 * NKV) * HD);
    CHECK_EQ(convert_armed(NULL, NULL, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "ffn_down_exps") && strstr(e.message, "no expert 1"));
    struct stat sb;
    unlink(g_out);
    tbx_hf_arch_test_ = NULL;
    /* the row is a test's: without it, its model_type is unknown */
    new_model(NULL, (NH + 2 * NKV) * HD);
    CHECK_EQ(convert_armed(NULL, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK(stat(g_out, &sb) != 0);
}

/* Every allocation of such a conversion fails in turn: TBX_E_NOMEM, no leak, no output. */
TBX_TEST(every_allocation_failure_is_clean) {
    tbx_hf_arch_test_ = &ROW;
    new_model(NULL, (NH + 2 * NKV) * HD);
    tbx_error e;
    tbx_fail_al count = {0, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    CHECK_OK(convert_armed(&cal, &count.armed, &e));
    const long total = count.calls;
    CHECK(total > 20);
    int clean = 1;
    for (long k = 1; k <= total; k++) {
        unlink(g_out);
        tbx_fail_al a = {0, 0, k, 0};
        tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        tbx_status st = convert_armed(&al, &a.armed, &e);
        struct stat sb;
        if (st != TBX_E_NOMEM && st != TBX_OK) {
            fprintf(stderr, "allocation %ld failed: status %d (%s)\n", k, (int)st,
                    st ? e.message : "ok");
            clean = 0;
        }
        if (st != TBX_OK && stat(g_out, &sb) == 0) {
            fprintf(stderr, "allocation %ld failed: output left behind\n", k);
            clean = 0;
        }
        if (a.live != 0) {
            fprintf(stderr, "allocation %ld failed: %lld bytes leaked\n", k, a.live);
            clean = 0;
        }
    }
    CHECK(clean);
    tbx_hf_arch_test_ = NULL;
}

/* The public list is the table, row by row. */
TBX_TEST(public_list_is_the_table) {
    CHECK_EQ(tbx_gguf_hf_arch_count(), tbx_hf_arch_count_());
    for (size_t i = 0; i < tbx_hf_arch_count_(); i++) {
        const char *arch = NULL;
        CHECK_STR(tbx_gguf_hf_arch_at(i, &arch), tbx_hf_arch_at_(i)->model_type);
        CHECK_STR(arch, tbx_hf_arch_at_(i)->arch);
    }
    const char *arch = "x";
    CHECK(tbx_gguf_hf_arch_at(tbx_hf_arch_count_(), &arch) == NULL && arch == NULL);
    CHECK(tbx_hf_arch_find_("tbx_test_fused") == NULL);
}

/* Gemma 3's multimodal row (issue 22): the language model's names in both layouts
 * (transformers 5's model.language_model., 4.x's language_model.model. and language_model.
 * lm_head) read as convert_hf_to_gguf.py's TextModel reads them (it drops "language_model."),
 * norms shifted by 1, the vision tower and the projector left out (0), anything else unknown. */
TBX_TEST(gemma3_multimodal_names) {
    const hf_arch *a = tbx_hf_arch_find_("gemma3");
    CHECK(a != NULL);
    if (!a) return;
    CHECK_STR(a->arch, "gemma3");
    static const struct { const char *hf, *gguf; int xform; } OK[] = {
        {"model.language_model.layers.3.self_attn.q_norm.weight", "blk.3.attn_q_norm.weight",
         HF_XF_ADD},
        {"language_model.model.layers.0.post_feedforward_layernorm.weight",
         "blk.0.post_ffw_norm.weight", HF_XF_ADD},
        {"model.language_model.layers.12.pre_feedforward_layernorm.weight", "blk.12.ffn_norm.weight",
         HF_XF_ADD},
        {"language_model.model.embed_tokens.weight", "token_embd.weight", HF_XF_NONE},
        {"model.language_model.norm.weight", "output_norm.weight", HF_XF_ADD},
        {"language_model.lm_head.weight", "output.weight", HF_XF_NONE},
        {"lm_head.weight", "output.weight", HF_XF_NONE},
        {"language_model.model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight",
         HF_XF_NONE},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        hf_match m;
        char name[128] = "";
        CHECK_EQ(tbx_hf_map_(a, OK[i].hf, &m), 1);
        if (tbx_hf_map_(a, OK[i].hf, &m) != 1) continue;
        CHECK(tbx_hf_gguf_name_(m.m->gguf, m.layer, m.suffix, name, sizeof name));
        CHECK_STR(name, OK[i].gguf);
        CHECK_EQ(m.m->xform, OK[i].xform);
        if (OK[i].xform == HF_XF_ADD) CHECK(m.m->k == 1.0f);
    }
    hf_match m;
    CHECK_EQ(tbx_hf_map_(a, "vision_tower.vision_model.embeddings.patch_embedding.weight", &m), 0);
    CHECK_EQ(tbx_hf_map_(a, "model.vision_tower.vision_model.post_layernorm.weight", &m), 0);
    CHECK_EQ(tbx_hf_map_(a, "multi_modal_projector.mm_input_projection_weight", &m), 0);
    CHECK_EQ(tbx_hf_map_(a, "model.multi_modal_projector.mm_soft_emb_norm.weight", &m), 0);
    CHECK_EQ(tbx_hf_map_(a, "model.language_model.layers.0.self_attn.qkv.weight", &m), -1);
    /* the text row does not take the multimodal layout */
    const hf_arch *t = tbx_hf_arch_find_("gemma3_text");
    CHECK(t != NULL && t->arch && strcmp(t->arch, "gemma3") == 0);
    if (t) CHECK_EQ(tbx_hf_map_(t, "model.language_model.norm.weight", &m), -1);
}

TBX_TEST_MAIN()
