/*
 * test_gguf_hf.c - a Hugging Face model directory written as a GGUF file for llama.cpp
 * (tbx_gguf_from_hf through tbx_convert): the quantization fallback table, a tiny llama
 * directory built here (config.json, a hand-written BPE tokenizer.json, a safetensors file)
 * converted and read back (architecture keys, tokenizer arrays, llama.cpp names, the q/k row
 * order computed here from its definition), TBX_CONVERT_RAW, every allocation failure of
 * the conversion handled without a leak or a partial output, and the bulk of a bigger model
 * moved in a few system calls (kernel copies, q/k rows reordered in blocks), with the same
 * bytes when the kernel cannot copy.
 *
 * llama.cpp itself is the judge in tests/python/test_hf_gguf.py; this test pins the C paths
 * (and runs under ASan+UBSan with the unit tests).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too (quantizing threads, the copy pipeline) */
#include "tensorbox.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];
static char g_out[600], g_out2[600];

/* src/io/copy.c: set, the writer copies unchanged bytes through a buffer (pread + pwrite)
 * instead of copy_file_range */
extern int tbx_out_no_copy_range_;

static void rm_tmp(void) {
    static const char *files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                  "model.safetensors", NULL};
    char p[800];
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
    unlink(g_out);
    unlink(g_out2);
}

static void write_str(const char *name, const char *s) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(s, 1, strlen(s), f) != strlen(s)) abort();
    fclose(f);
}

/* 2 layers' worth of a llama: hidden 8, 2 heads of 4 (q: 8 rows), 1 kv head (k: 4 rows). */
enum { E = 8, NH = 2, NKV = 1, HD = 4, FF = 16, V = 6 };

static const char CONFIG[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 8,"
    " \"intermediate_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
    " \"num_key_value_heads\": 1, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05,"
    " \"rope_theta\": 10000.0, \"vocab_size\": 6, \"_name_or_path\": \"org/tiny\"}";
static const char TOKENIZER[] =
    "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 2, \"b\": 3, \"ab\": 4},"
    " \"merges\": [[\"a\", \"b\"]]},"
    " \"added_tokens\": [{\"id\": 0, \"content\": \"<s>\", \"special\": true},"
    " {\"id\": 1, \"content\": \"</s>\", \"special\": true}]}";
static const char TOKCFG[] = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static const struct { const char *name; uint64_t rows, cols; } T[] = {
    {"model.embed_tokens.weight", V, E},
    {"model.layers.0.input_layernorm.weight", 0, E},
    {"model.layers.0.self_attn.q_proj.weight", NH * HD, E},
    {"model.layers.0.self_attn.k_proj.weight", NKV * HD, E},
    {"model.layers.0.self_attn.v_proj.weight", NKV * HD, E},
    {"model.layers.0.self_attn.o_proj.weight", E, NH * HD},
    {"model.layers.0.self_attn.rotary_emb.inv_freq", 0, HD / 2},
    {"model.layers.0.post_attention_layernorm.weight", 0, E},
    {"model.layers.0.mlp.gate_proj.weight", FF, E},
    {"model.layers.0.mlp.up_proj.weight", FF, E},
    {"model.layers.0.mlp.down_proj.weight", E, FF},
    {"model.norm.weight", 0, E},
    {"lm_head.weight", V, E},
};
#define NT (sizeof T / sizeof T[0])

/* Value of element (r, c) of tensor k: distinct for every tensor, row and column. */
static float val(size_t k, uint64_t r, uint64_t c) { return (float)(k * 1000 + r * 32 + c); }

/* A writer of a new g_dir/model.safetensors (the old one removed); aborts on failure. */
static tbx_writer *new_weights(void) {
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    unlink(p);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, p, &wo, &e) != TBX_OK) abort();
    return w;
}

static void new_model(void) {
    if (!g_dir[0]) {
        if (!mkdtemp(tbx_test_tmppath(g_dir, sizeof g_dir, "tbx_test_gguf_hf_XXXXXX"))) abort();
        snprintf(g_out, sizeof g_out, "%s.out.gguf", g_dir);
        snprintf(g_out2, sizeof g_out2, "%s.out2.gguf", g_dir);
        atexit(rm_tmp);
    }
    write_str("config.json", CONFIG);
    write_str("tokenizer.json", TOKENIZER);
    write_str("tokenizer_config.json", TOKCFG);
    tbx_writer *w = new_weights();
    tbx_error e;
    for (size_t k = 0; k < NT; k++) {
        uint64_t shape[2] = {T[k].rows, T[k].cols};
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = T[k].name;
        d.name_len = strlen(T[k].name);
        d.dtype = TBX_DT_F32;
        d.ndim = T[k].rows ? 2 : 1;
        d.shape = T[k].rows ? shape : shape + 1;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    }
    for (size_t k = 0; k < NT; k++) {
        uint64_t rows = T[k].rows ? T[k].rows : 1;
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < T[k].cols; c++) {
                float x = val(k, r, c);
                if (tbx_writer_write_tensor(w, k, &x, 4, &e) != TBX_OK) abort();
            }
    }
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
}

TBX_TEST(quant_fallback_follows_llama_quantize) {
    /* llama.cpp src/llama-quant.cpp tensor_type_fallback, row lengths 384 / 256 / 48 / 40 */
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q4_K, 256), TBX_DT_Q4_K);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q4_K, 384), TBX_DT_Q5_0);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q5_K, 384), TBX_DT_Q5_1);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q6_K, 384), TBX_DT_Q8_0);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q2_K, 384), TBX_DT_Q4_0);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q3_K, 384), TBX_DT_Q4_0);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q8_0, 384), TBX_DT_Q8_0);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q8_0, 40), TBX_DT_F16);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q4_K, 48), TBX_DT_F16);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_Q4_K, 0), TBX_DT_F16);
    CHECK_EQ(tbx_gguf_quant_fallback(TBX_DT_F32, 256), TBX_DT_INVALID);
}

/* The directory converted to GGUF at g_out (tbx_test_convert_gguf). */
static tbx_status convert_dir_armed(const tbx_allocator *al, int *armed, uint32_t flags,
                                    tbx_dtype quant, tbx_error *e) {
    return tbx_test_convert_gguf(al, armed, g_dir, g_out, flags, quant, e);
}

static tbx_status convert_dir(const tbx_allocator *al, uint32_t flags, tbx_dtype quant,
                              tbx_error *e) {
    return convert_dir_armed(al, NULL, flags, quant, e);
}

static const tbx_value *meta(tbx_file *g, const char *key) { return tbx_meta_find(g, key); }

static int str_is(const tbx_value *v, const char *s) {
    size_t n = 0;
    const char *p = v ? tbx_value_get_str(v, &n) : NULL;
    return p && n == strlen(s) && memcmp(p, s, n) == 0;
}

static uint64_t u64_of(const tbx_value *v) {
    uint64_t u = UINT64_MAX;
    if (v) tbx_value_get_u64(v, &u);
    return u;
}

TBX_TEST(tiny_llama_directory_to_gguf) {
    new_model();
    tbx_error e;
    CHECK_OK(convert_dir(NULL, 0, TBX_DT_INVALID, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    CHECK(str_is(meta(g, "general.architecture"), "llama"));
    CHECK(str_is(meta(g, "general.name"), "tiny"));
    CHECK_EQ(u64_of(meta(g, "llama.embedding_length")), 8);
    CHECK_EQ(u64_of(meta(g, "llama.attention.head_count")), 2);
    CHECK_EQ(u64_of(meta(g, "llama.attention.head_count_kv")), 1);
    CHECK_EQ(u64_of(meta(g, "llama.rope.dimension_count")), 4);
    CHECK_EQ(u64_of(meta(g, "llama.vocab_size")), 6);
    CHECK_EQ(u64_of(meta(g, "general.file_type")), 0); /* all f32 */
    CHECK(str_is(meta(g, "tokenizer.ggml.model"), "gpt2"));
    CHECK_EQ(u64_of(meta(g, "tokenizer.ggml.bos_token_id")), 0);
    CHECK_EQ(u64_of(meta(g, "tokenizer.ggml.eos_token_id")), 1);
    const tbx_value *toks = meta(g, "tokenizer.ggml.tokens");
    CHECK(toks && tbx_value_len(toks) == 6);
    if (toks) {
        const char *want[6] = {"<s>", "</s>", "a", "b", "ab", "[PAD5]"};
        for (uint64_t i = 0; i < 6; i++) {
            size_t n = 0;
            const char *p = tbx_value_str_at(toks, i, &n);
            CHECK(p && n == strlen(want[i]) && memcmp(p, want[i], n) == 0);
        }
    }
    const tbx_value *merges = meta(g, "tokenizer.ggml.merges");
    CHECK(merges && tbx_value_len(merges) == 1);
    if (merges) {
        size_t n = 0;
        const char *p = tbx_value_str_at(merges, 0, &n);
        CHECK(p && n == 3 && memcmp(p, "a b", 3) == 0);
    }
    /* 12 tensors: inv_freq dropped, names llama.cpp's, q/k rows reordered per head */
    CHECK_EQ(tbx_tensor_count(g), NT - 1);
    static const struct { const char *gguf; size_t src; int heads; } M[] = {
        {"token_embd.weight", 0, 0},         {"blk.0.attn_norm.weight", 1, 0},
        {"blk.0.attn_q.weight", 2, NH},      {"blk.0.attn_k.weight", 3, NKV},
        {"blk.0.attn_v.weight", 4, 0},       {"blk.0.attn_output.weight", 5, 0},
        {"blk.0.ffn_norm.weight", 7, 0},     {"blk.0.ffn_gate.weight", 8, 0},
        {"blk.0.ffn_up.weight", 9, 0},       {"blk.0.ffn_down.weight", 10, 0},
        {"output_norm.weight", 11, 0},       {"output.weight", 12, 0},
    };
    for (size_t m = 0; m < sizeof M / sizeof M[0]; m++) {
        uint64_t i = UINT64_MAX;
        CHECK_OK(tbx_tensor_find(g, M[m].gguf, &i));
        if (i == UINT64_MAX) continue;
        const size_t k = M[m].src;
        const uint64_t rows = T[k].rows ? T[k].rows : 1, cols = T[k].cols;
        float got[FF * E];
        CHECK_OK(tbx_tensor_read_f32(g, i, 0, rows * cols, got, &e));
        int same = 1;
        for (uint64_t r = 0; r < rows; r++) {
            /* the reordering by its definition: view the rows as [heads][2][d/2], swap the
             * last two axes; output row (h, j, i) holds input row (h, i, j) */
            uint64_t sr = r;
            if (M[m].heads) {
                const uint64_t d = rows / (uint64_t)M[m].heads, h = r / d;
                const uint64_t j = (r % d) / 2, ii = (r % d) % 2;
                sr = h * d + ii * (d / 2) + j;
            }
            for (uint64_t c = 0; c < cols; c++)
                if (got[r * cols + c] != val(k, sr, c)) same = 0;
        }
        CHECK(same);
        if (!same) fprintf(stderr, "tensor %s differs\n", M[m].gguf);
    }
    tbx_close(g);
}

TBX_TEST(raw_flag_keeps_the_hf_layout) {
    new_model();
    tbx_error e;
    /* sections cannot go to GGUF: --raw needs them dropped, as any plain conversion does */
    CHECK(convert_dir(NULL, TBX_CONVERT_RAW, TBX_DT_INVALID, &e) == TBX_E_UNSUPPORTED);
    CHECK_OK(convert_dir(NULL, TBX_CONVERT_RAW | TBX_CONVERT_DROP_SECTIONS, TBX_DT_INVALID, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    uint64_t i;
    CHECK_OK(tbx_tensor_find(g, "model.layers.0.self_attn.q_proj.weight", &i));
    CHECK_EQ(tbx_tensor_count(g), NT);
    CHECK(meta(g, "general.architecture") == NULL);
    tbx_close(g);
}

/* A bigger llama in f16: hidden 256, 2 heads of 1024 rows' worth (q: 2048 rows, k: 1024 rows
 * of 512 bytes), a 16 MiB embedding, a norm (f16 -> f32). Element (r, c) of tensor k has the
 * f16 bits big_bits(k, r, c) (finite, distinct per row). */
enum { BE = 256, BV = 32768, BQ = 2048, BK = 1024 };
static const char BIG_CONFIG[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 256,"
    " \"intermediate_size\": 512, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
    " \"num_key_value_heads\": 1, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05,"
    " \"rope_theta\": 10000.0, \"vocab_size\": 32768, \"head_dim\": 1024}";
static const struct { const char *name; uint64_t rows; } BT[] = {
    {"model.embed_tokens.weight", BV},
    {"model.layers.0.self_attn.q_proj.weight", BQ},
    {"model.layers.0.self_attn.k_proj.weight", BK},
    {"model.layers.0.input_layernorm.weight", 0},
};
static uint16_t big_bits(size_t k, uint64_t r, uint64_t c) {
    return (uint16_t)((k * 7919 + r * 131 + c * 3) % 0x7800);
}

static void new_big_model(void) {
    new_model();
    write_str("config.json", BIG_CONFIG);
    tbx_writer *w = new_weights();
    tbx_error e;
    for (size_t k = 0; k < sizeof BT / sizeof BT[0]; k++) {
        uint64_t shape[2] = {BT[k].rows, BE};
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = BT[k].name;
        d.name_len = strlen(BT[k].name);
        d.dtype = TBX_DT_F16;
        d.ndim = BT[k].rows ? 2 : 1;
        d.shape = BT[k].rows ? shape : shape + 1;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    }
    uint16_t row[BE];
    for (size_t k = 0; k < sizeof BT / sizeof BT[0]; k++)
        for (uint64_t r = 0; r < (BT[k].rows ? BT[k].rows : 1); r++) {
            for (uint64_t c = 0; c < BE; c++) {
                uint16_t b = big_bits(k, r, c);
                memcpy(&row[c], &b, 2); /* little-endian host (x86-64) */
            }
            if (tbx_writer_write_tensor(w, k, row, sizeof row, &e) != TBX_OK) abort();
        }
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
}

/* Read and write system calls of this process so far (/proc/self/io: syscr, syscw). */
static int proc_io(uint64_t *syscr, uint64_t *syscw) {
    FILE *fp = fopen("/proc/self/io", "r");
    if (!fp) return 0;
    char line[128];
    int got = 0;
    unsigned long long v;
    while (fgets(line, sizeof line, fp)) {
        if (sscanf(line, "syscr: %llu", &v) == 1) { *syscr = v; got |= 1; }
        if (sscanf(line, "syscw: %llu", &v) == 1) { *syscw = v; got |= 2; }
    }
    fclose(fp);
    return got == 3;
}

/* Converts the directory to `out` (f16 kept), counting the read and write system calls. */
static tbx_status convert_big(const char *out, uint64_t *reads, uint64_t *writes, tbx_error *e) {
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, g_dir, NULL, e);
    if (st != TBX_OK) return st;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_GGUF;
    co.write.flags = TBX_WRITE_OVERWRITE;
    uint64_t r0 = 0, w0 = 0, r1 = 0, w1 = 0;
    CHECK(proc_io(&r0, &w0));
    st = tbx_convert(f, out, &co, e);
    CHECK(proc_io(&r1, &w1));
    *reads = r1 - r0;
    *writes = w1 - w0;
    tbx_close(f);
    return st;
}

/* Tensor `name` of g is stored as `want`. */
static void check_dtype(tbx_file *g, const char *name, tbx_dtype want) {
    uint64_t i = UINT64_MAX;
    CHECK_OK(tbx_tensor_find(g, name, &i));
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(g, i, &ti));
    CHECK_EQ(ti.dtype, want);
}

/* The bulk of a model moves in a few big system calls, not per row: tensors kept as stored are
 * copied by the kernel (copy_file_range) when their offsets in the two files are congruent
 * modulo 64 KiB, else through a 1 MiB buffer (tbx_out_copy_fd); the q/k rows are reordered in
 * blocks of whole heads (one read per block). The bytes are those of the definitions, and the
 * same when the kernel cannot copy (the buffered fallback). */
TBX_TEST(bulk_bytes_move_in_few_system_calls) {
    new_big_model();
    tbx_error e;
    uint64_t reads = 0, writes = 0;
    CHECK_OK(convert_big(g_out, &reads, &writes, &e));
    fprintf(stderr, "default: %llu reads, %llu writes\n", (unsigned long long)reads,
            (unsigned long long)writes);
    /* before: 3072 row reads for q/k and 4 MiB pieces of the 16 MiB embedding */
    CHECK(reads < 40);
    CHECK(writes < 40);
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (g) {
        static const struct { const char *gguf; size_t src; uint64_t heads; } M[] = {
            {"token_embd.weight", 0, 0}, {"blk.0.attn_q.weight", 1, 2}, {"blk.0.attn_k.weight", 2, 1}};
        static uint16_t got[BV * BE];
        for (size_t m = 0; m < 3; m++) {
            uint64_t i = UINT64_MAX;
            CHECK_OK(tbx_tensor_find(g, M[m].gguf, &i));
            const uint64_t rows = BT[M[m].src].rows;
            size_t need = 0;
            CHECK_OK(tbx_tensor_read(g, i, got, sizeof got, &need, &e));
            CHECK_EQ(need, rows * BE * 2);
            int same = 1;
            for (uint64_t r = 0; r < rows && need == rows * BE * 2; r++) {
                uint64_t sr = r; /* [heads][2][d/2] -> [heads][d/2][2], as above */
                if (M[m].heads) {
                    const uint64_t d = rows / M[m].heads, h = r / d;
                    sr = h * d + ((r % d) % 2) * (d / 2) + (r % d) / 2;
                }
                for (uint64_t c = 0; c < BE; c++) {
                    uint16_t b;
                    memcpy(&b, &got[r * BE + c], 2);
                    if (b != big_bits(M[m].src, sr, c)) same = 0;
                }
            }
            CHECK(same);
            if (!same) fprintf(stderr, "tensor %s differs\n", M[m].gguf);
        }
        check_dtype(g, "blk.0.attn_norm.weight", TBX_DT_F32);
        tbx_close(g);
    }
    /* the fallback: pread + pwrite through a 1 MiB buffer (the 16 MiB embedding: 16 writes),
     * the same file */
    tbx_out_no_copy_range_ = 1;
    CHECK_OK(convert_big(g_out2, &reads, &writes, &e));
    tbx_out_no_copy_range_ = 0;
    fprintf(stderr, "buffered: %llu reads, %llu writes\n", (unsigned long long)reads,
            (unsigned long long)writes);
    CHECK(writes >= 16 && writes < 16 + 40);
    size_t n1 = 0, n2 = 0;
    uint8_t *a = tbx_test_slurp(g_out, &n1), *b = tbx_test_slurp(g_out2, &n2);
    CHECK(a && b && n1 == n2 && n1 > (size_t)BV * BE * 2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    unlink(g_out2);
}

/* The input shrinks after the open: the kernel copy reaches its end early and the conversion
 * fails (TBX_E_TRUNCATED naming the input offset), leaving no output. */
/* --quant on the worker threads: the same bytes with one thread and with three (the 32768 x 256
 * embedding is 8 chunks of 4096 q4_K blocks, each split between the workers), and the q4_K
 * blocks are those of the single-threaded quantizer (read back through tbx_tensor_read_f32 of
 * both files: equal values). */
static tbx_status convert_big_quant(const char *out, const char *threads, tbx_error *e) {
    setenv("TBX_THREADS", threads, 1);
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, g_dir, NULL, e);
    if (st == TBX_OK) {
        tbx_convert_options co;
        tbx_convert_options_init(&co);
        co.write.format = TBX_FORMAT_GGUF;
        co.write.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
        co.quant_to = TBX_DT_Q4_K;
        st = tbx_convert(f, out, &co, e);
    }
    tbx_close(f);
    unsetenv("TBX_THREADS");
    return st;
}

TBX_TEST(quantizing_threads_give_the_same_bytes) {
    new_big_model();
    tbx_error e;
    const char *old = getenv("TBX_THREADS");
    char *saved = old ? strdup(old) : NULL;
    CHECK_OK(convert_big_quant(g_out, "1", &e));
    CHECK_OK(convert_big_quant(g_out2, "3", &e));
    if (saved) {
        setenv("TBX_THREADS", saved, 1);
        free(saved);
    }
    size_t n1 = 0, n2 = 0;
    uint8_t *a = tbx_test_slurp(g_out, &n1), *b = tbx_test_slurp(g_out2, &n2);
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    /* and it was quantized: q4_K is 144 bytes per 256 values, far below the f16 size */
    CHECK(n1 > (size_t)BV * BE / 256 * 144 && n1 < (size_t)BV * BE * 2 / 2);
    free(a);
    free(b);
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (g) {
        check_dtype(g, "token_embd.weight", TBX_DT_Q4_K);
        tbx_close(g);
    }
    unlink(g_out2);
}

TBX_TEST(input_shrinking_under_the_copy) {
    new_big_model();
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, g_dir, NULL, &e));
    if (!f) return;
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    CHECK(truncate(p, 4 << 20) == 0); /* inside the embedding */
    unlink(g_out);
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_GGUF;
    tbx_status st = tbx_convert(f, g_out, &co, &e);
    CHECK_EQ(st, TBX_E_TRUNCATED);
    if (st) fprintf(stderr, "shrunk input: %s\n", e.message);
    struct stat sb;
    CHECK(stat(g_out, &sb) != 0);
    tbx_close(f);
}

/* An allocator that counts the bytes live and their peak. */
typedef struct peak_al { long long live, peak; } peak_al;
static void *pa_alloc(void *ud, size_t n) {
    peak_al *a = ud;
    void *p = malloc(n ? n : 1);
    if (p && (a->live += (long long)n) > a->peak) a->peak = a->live;
    return p;
}
static void *pa_realloc(void *ud, void *p, size_t o, size_t n) {
    peak_al *a = ud;
    void *q = realloc(p, n ? n : 1);
    if (q && (a->live += (long long)n - (long long)o) > a->peak) a->peak = a->live;
    return q;
}
static void pa_free(void *ud, void *p, size_t n) {
    peak_al *a = ud;
    if (p) a->live -= (long long)n;
    free(p);
}

/* CONFIG with `from` replaced by `to` (once; aborts when absent). */
static void write_config_edit(const char *from, const char *to) {
    const char *at = strstr(CONFIG, from);
    if (!at) abort();
    char buf[1024];
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - CONFIG), CONFIG, to, at + strlen(from));
    write_str("config.json", buf);
}

/* Hyper-parameters that contradict the tensors (issue 19): each conversion fails with
 * TBX_E_FORMAT naming the config field, the message giving its value and what the tensors
 * hold; no output. The tiny llama: hidden 8, 2 heads of 4, 1 kv head, 1 layer, ffn 16, 6 rows
 * of embedding. */
TBX_TEST(hparams_that_contradict_the_tensors_are_named) {
    static const struct { const char *from, *to, *field, *says[2]; } C[] = {
        {"\"hidden_size\": 8", "\"hidden_size\": 0", "hidden_size",
         {"hidden_size = 0", "model.embed_tokens.weight has 8 columns"}},
        {"\"num_hidden_layers\": 1", "\"num_hidden_layers\": 4294967295", "num_hidden_layers",
         {"num_hidden_layers = 4294967295", "layers 0 .. 0"}},
        {"\"num_hidden_layers\": 1", "\"num_hidden_layers\": 2", "num_hidden_layers",
         {"num_hidden_layers = 2", "layers 0 .. 0"}},
        {"\"num_attention_heads\": 2", "\"num_attention_heads\": 3", "num_attention_heads",
         {"num_attention_heads = 3", "q_proj.weight has 8 rows"}},
        {"\"num_key_value_heads\": 1", "\"num_key_value_heads\": 2", "num_key_value_heads",
         {"num_key_value_heads = 2", "k_proj.weight has 4 rows"}},
        {"\"intermediate_size\": 16", "\"intermediate_size\": 17", "intermediate_size",
         {"intermediate_size = 17", "has 16"}},
        {"\"vocab_size\": 6", "\"vocab_size\": 20000000", "vocab_size",
         {"vocab_size = 20000000", "model.embed_tokens.weight has 6 rows"}},
        {"\"vocab_size\": 6", "\"vocab_size\": 5", "vocab_size",
         {"vocab_size = 5", "model.embed_tokens.weight has 6 rows"}},
        {"\"vocab_size\": 6", "\"vocab_size\": 6, \"head_dim\": 8", "num_attention_heads",
         {"num_attention_heads = 2 (heads of 8, head_dim", "q_proj.weight has 8 rows"}},
    };
    new_model();
    struct stat sb;
    for (size_t k = 0; k < sizeof C / sizeof C[0]; k++) {
        write_config_edit(C[k].from, C[k].to);
        unlink(g_out);
        tbx_error e;
        memset(&e, 0, sizeof e);
        peak_al pa = {0, 0};
        tbx_allocator al = {pa_alloc, pa_realloc, pa_free, &pa};
        tbx_status st = convert_dir(&al, 0, TBX_DT_INVALID, &e);
        int ok = st == TBX_E_FORMAT && strcmp(e.field, C[k].field) == 0 &&
                 strstr(e.message, C[k].says[0]) && strstr(e.message, C[k].says[1]);
        if (!ok) fprintf(stderr, "%s: %d %s: %s\n", C[k].to, (int)st, e.field, e.message);
        CHECK(ok);
        CHECK(stat(g_out, &sb) != 0);
        /* refused before anything is sized by the value (vocab_size 20,000,000 built a vocabulary
         * of 20 million tokens: 1 GB) */
        CHECK(pa.peak < (1 << 20));
        CHECK_EQ(pa.live, 0);
    }
}

/* n_head not a multiple of n_head_kv: ggml's attention cannot broadcast the kv heads (llama.cpp
 * would assert while running): refused naming num_key_value_heads. 3 heads and 2 kv heads of 4
 * (head_dim given), every shape consistent with them. */
TBX_TEST(kv_heads_must_divide_the_heads) {
    new_model();
    write_str("config.json",
              "{\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16,"
              " \"num_hidden_layers\": 1, \"num_attention_heads\": 3, \"num_key_value_heads\": 2,"
              " \"head_dim\": 4, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05}");
    static const struct { const char *name; uint64_t rows, cols; } S[] = {
        {"model.embed_tokens.weight", V, E},
        {"model.layers.0.self_attn.q_proj.weight", 12, E},
        {"model.layers.0.self_attn.k_proj.weight", 8, E},
        {"model.layers.0.self_attn.v_proj.weight", 8, E},
        {"model.layers.0.self_attn.o_proj.weight", E, 12},
    };
    tbx_writer *w = new_weights();
    tbx_error e;
    for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
        uint64_t shape[2] = {S[k].rows, S[k].cols};
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = S[k].name;
        d.name_len = strlen(S[k].name);
        d.dtype = TBX_DT_F32;
        d.ndim = 2;
        d.shape = shape;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    }
    static float zeros[12 * E];
    for (size_t k = 0; k < sizeof S / sizeof S[0]; k++)
        if (tbx_writer_write_tensor(w, k, zeros, S[k].rows * S[k].cols * 4, &e) != TBX_OK) abort();
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
    memset(&e, 0, sizeof e);
    CHECK_EQ(convert_dir(NULL, 0, TBX_DT_INVALID, &e), TBX_E_FORMAT);
    CHECK_STR(e.field, "num_key_value_heads");
    CHECK(strstr(e.message, "does not divide") != NULL);
    /* 4 heads instead (q 16 rows): converted, with the head size written as key/value length */
    write_str("config.json",
              "{\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16,"
              " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 2,"
              " \"head_dim\": 4, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05}");
    CHECK_EQ(convert_dir(NULL, 0, TBX_DT_INVALID, &e), TBX_E_FORMAT); /* q: 12 rows, not 2 x 4 */
    CHECK_STR(e.field, "num_attention_heads");
}

/* Without vocab_size in config.json the vocabulary is the embedding's rows; a head_dim config.json
 * gives is written as llama.cpp's key and value length (convert_hf_to_gguf.py does the same). */
TBX_TEST(vocabulary_follows_the_embedding_rows) {
    new_model();
    write_config_edit(", \"vocab_size\": 6", ", \"head_dim\": 4");
    tbx_error e;
    CHECK_OK(convert_dir(NULL, 0, TBX_DT_INVALID, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    const tbx_value *toks = meta(g, "tokenizer.ggml.tokens");
    CHECK(toks && tbx_value_len(toks) == V);
    CHECK_EQ(u64_of(meta(g, "llama.vocab_size")), V);
    CHECK_EQ(u64_of(meta(g, "llama.attention.key_length")), HD);
    CHECK_EQ(u64_of(meta(g, "llama.attention.value_length")), HD);
    tbx_close(g);
}

/* Every allocation of the conversion (the directory's open is test_hfdir's business) fails in
 * turn: each run ends in TBX_E_NOMEM without a leak or an output file, or succeeds when the
 * failure is one the library tolerates (a shrinking realloc that keeps the larger block). */
TBX_TEST(every_allocation_failure_is_clean) {
    new_model();
    tbx_error e;
    tbx_fail_al count = {0, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    CHECK_OK(convert_dir_armed(&cal, &count.armed, 0, TBX_DT_Q8_0, &e));
    const long total = count.calls;
    CHECK(total > 20);
    int clean = 1;
    for (long k = 1; k <= total; k++) {
        unlink(g_out);
        tbx_fail_al a = {0, 0, k, 0};
        tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        tbx_status st = convert_dir_armed(&al, &a.armed, 0, TBX_DT_Q8_0, &e);
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
}

TBX_TEST_MAIN()
